package vault

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"avfs/wire"
)

// TestImportSyncNeverReadThroughLinks checks that a host tree's symlinks
// are read as symlinks, and that an entry replaced between being listed
// and being opened (by a process still writing the copy) is never read
// through: the transfer fails, and nothing from outside the tree reaches
// the vault.
func TestImportSyncNeverReadThroughLinks(t *testing.T) {
	ctx := context.Background()
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "shadow")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	swapLink := func(target string) func(hp string) error {
		return func(hp string) error {
			if err := os.RemoveAll(hp); err != nil {
				return err
			}
			return os.Symlink(target, hp)
		}
	}
	cases := []struct {
		name   string
		victim string                // host entry (relative) swapped just before it is opened; "" for none
		swap   func(hp string) error // what replaces it
		fails  bool
	}{
		{name: "planted symlink to a secret file"},
		{name: "file replaced by a symlink to a secret file", victim: "f", swap: swapLink(secret), fails: true},
		{name: "directory replaced by a symlink to a secret directory", victim: "d", swap: swapLink(secretDir), fails: true},
		{name: "file replaced by a named pipe", victim: "f", swap: func(hp string) error {
			if err := os.Remove(hp); err != nil {
				return err
			}
			return syscall.Mkfifo(hp, 0o600)
		}, fails: true},
	}
	for _, tc := range cases {
		for _, op := range []string{"import", "sync"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				_, v := newVault(t)
				copyDir := filepath.Join(t.TempDir(), "copy")
				if _, err := v.Export(ctx, "/", copyDir, false); err != nil {
					t.Fatal(err)
				}
				since := time.Now()
				for rel, content := range map[string]string{"f": "file", "d/g": "inner"} {
					p := filepath.Join(copyDir, rel)
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Symlink(secret, filepath.Join(copyDir, "shadow")); err != nil {
					t.Fatal(err)
				}
				swapped := false
				beforeHostOpen = func(hp string) {
					if tc.victim != "" && !swapped && hp == filepath.Join(copyDir, tc.victim) {
						swapped = true
						if err := tc.swap(hp); err != nil {
							t.Error(err)
						}
					}
				}
				t.Cleanup(func() { beforeHostOpen = nil })
				var err error
				if op == "import" {
					_, err = v.Import(ctx, copyDir, "/in")
				} else {
					_, err = v.Sync(ctx, copyDir, since)
				}
				if tc.fails != (err != nil) || err != nil && !wire.HasCode(err, wire.CodeHostIO) {
					t.Fatalf("%s: %v (want failure: %v)", op, err, tc.fails)
				}
				if tc.victim != "" && !swapped {
					t.Fatal("the entry was never opened")
				}
				// Nothing of the secret in the vault, whatever happened.
				err = v.Walk(ctx, "/", func(e Entry) error {
					if e.Kind != KindFile {
						return nil
					}
					var b bytes.Buffer
					if _, err := v.ReadFile(ctx, e.Path, &b); err != nil {
						return err
					}
					if strings.Contains(b.String(), "SECRET") {
						t.Errorf("%s holds the secret", e.Path)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !tc.fails {
					p := "/shadow"
					if op == "import" {
						p = "/in/shadow"
					}
					if e, err := v.Stat(ctx, p); err != nil || e.Kind != KindSymlink || e.Target != secret {
						t.Fatalf("planted link imported as %+v (%v)", e, err)
					}
				}
				mustCheck(t, v)
			})
		}
	}
}

// TestSyncKeepsSetidDroppedByExport checks that a materialised copy,
// whose files lost their setuid/setgid bits in the export, does not take
// them off the vault unless the host file was changed.
func TestSyncKeepsSetidDroppedByExport(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/suid", "#!/bin/sh\n")
	write(t, v, "/sgid", "#!/bin/sh\n")
	if _, err := v.Chmod(ctx, "/suid", 0o4755); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Chmod(ctx, "/sgid", 0o2755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "copy")
	if _, err := v.Export(ctx, "/", dir, false); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	if fi, _ := os.Stat(filepath.Join(dir, "suid")); fi.Mode() != 0o755 {
		t.Fatalf("copy mode %v", fi.Mode())
	}
	if n, err := v.Unsynced(ctx, dir, since); err != nil || n != 0 {
		t.Fatalf("unsynced %d %v", n, err)
	}
	// Chmodded with a ctime after since (file times are coarse: again
	// until it is).
	for {
		p := filepath.Join(dir, "sgid")
		if err := os.Chmod(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(p); err != nil || ctimeOf(fi).After(since) {
			break
		}
	}
	if _, err := v.Sync(ctx, dir, since); err != nil {
		t.Fatal(err)
	}
	if e, _ := v.Stat(ctx, "/suid"); e.Mode != 0o4755 {
		t.Errorf("untouched setuid file: mode %o after sync", e.Mode)
	}
	if e, _ := v.Stat(ctx, "/sgid"); e.Mode != 0o700 {
		t.Errorf("chmodded file: mode %o after sync", e.Mode)
	}
}
