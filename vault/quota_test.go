package vault

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

func i64(n int64) *int64 { return &n }

// TestQuotasOnEveryPath checks that each write path fails with
// quota_exceeded and leaves the vault exactly as it was.
func TestQuotasOnEveryPath(t *testing.T) {
	ctx := context.Background()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "big"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	mb := bytes.Repeat([]byte("x"), 1<<20)
	cases := []struct {
		name  string
		quota QuotaChange
		op    func(v *Vault) error
	}{
		{"write file size", QuotaChange{MaxFileSizeMB: i64(1)}, func(v *Vault) error {
			_, err := v.WriteFile(ctx, "/new", bytes.NewReader(append(mb, 'y')), WriteOptions{})
			return err
		}},
		{"append file size", QuotaChange{MaxFileSizeMB: i64(1)}, func(v *Vault) error {
			_, err := v.WriteFile(ctx, "/seed", bytes.NewReader(mb), WriteOptions{Append: true})
			return err
		}},
		{"vault size", QuotaChange{MaxSizeMB: i64(1)}, func(v *Vault) error {
			_, err := v.WriteFile(ctx, "/new", bytes.NewReader(mb), WriteOptions{})
			return err
		}},
		{"file count", QuotaChange{MaxFiles: i64(4)}, func(v *Vault) error {
			_, err := v.Mkdir(ctx, "/a/b/c", 0, true)
			return err
		}},
		{"copy", QuotaChange{MaxSizeMB: i64(1)}, func(v *Vault) error {
			_, err := v.Copy(ctx, "/big", "/copy", false)
			return err
		}},
		{"revert", QuotaChange{MaxSizeMB: i64(1)}, func(v *Vault) error {
			_, err := v.Revert(ctx, "/hist", 1)
			return err
		}},
		{"import", QuotaChange{MaxSizeMB: i64(1)}, func(v *Vault) error {
			_, err := v.Import(ctx, host, "/imported")
			return err
		}},
		{"symlink count", QuotaChange{MaxFiles: i64(3)}, func(v *Vault) error {
			_, err := v.Symlink(ctx, "seed", "/l")
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, v := newVault(t)
			write(t, v, "/seed", "seed")
			write(t, v, "/big", strings.Repeat("b", 700<<10))
			write(t, v, "/hist", strings.Repeat("h", 700<<10))
			write(t, v, "/hist", "small now")
			if _, err := v.SetQuota(ctx, c.quota); err != nil {
				t.Fatal(err)
			}
			before, _ := v.Usage(ctx)
			var list []string
			_ = v.Walk(ctx, "/", func(e Entry) error { list = append(list, e.Path); return nil })
			err := c.op(v)
			if !wire.HasCode(err, wire.CodeQuotaExceeded) {
				t.Fatalf("got %v, want quota_exceeded", err)
			}
			after, _ := v.Usage(ctx)
			var list2 []string
			_ = v.Walk(ctx, "/", func(e Entry) error { list2 = append(list2, e.Path); return nil })
			if before != after || strings.Join(list, ",") != strings.Join(list2, ",") {
				t.Fatalf("vault changed: %+v -> %+v, %v -> %v", before, after, list, list2)
			}
			mustCheck(t, v)
		})
	}
}

func TestQuotaAllowsShrinking(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/a", strings.Repeat("x", 3<<20))
	if _, err := v.SetQuota(ctx, QuotaChange{MaxSizeMB: i64(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Remove(ctx, "/a", false); err != nil { // over quota, but deleting is fine
		t.Fatal(err)
	}
	if _, err := v.SetQuota(ctx, QuotaChange{MaxSizeMB: i64(-1)}); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("negative quota: %v", err)
	}
}
