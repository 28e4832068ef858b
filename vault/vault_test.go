package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

// newVault creates a vault in a temporary store.
func newVault(t *testing.T) (*Store, *Vault) {
	t.Helper()
	s := NewStore(t.TempDir(), Options{Actor: "test"})
	v, err := s.Create(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return s, v
}

func write(t *testing.T, v *Vault, p, content string) {
	t.Helper()
	if _, err := v.WriteFile(context.Background(), p, strings.NewReader(content), WriteOptions{Parents: true}); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
}

func read(t *testing.T, v *Vault, p string) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := v.ReadFile(context.Background(), p, &b); err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b.String()
}

func mustCheck(t *testing.T, v *Vault) {
	t.Helper()
	rep, err := v.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("vault check: %+v", rep.Problems)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = io.ReadFull(rand.Reader, b)
	return b
}

func TestWriteReadRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	for _, n := range []int{0, 1, 1000, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 17, 1 << 20} {
		data := randBytes(n)
		p := filepath.Join("/d", "f"+strings.Repeat("x", n%7))
		if _, err := v.WriteFile(ctx, p, bytes.NewReader(data), WriteOptions{Parents: true}); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := v.ReadFile(ctx, p, &b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("size %d: content differs", n)
		}
		e, err := v.Stat(ctx, p)
		if err != nil || e.Size != int64(n) {
			t.Fatalf("stat size %d: %+v %v", n, e, err)
		}
	}
	mustCheck(t, v)
}

func TestErrorsAreTyped(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/a/file", "x")
	cases := []struct {
		name string
		err  error
		code wire.Code
	}{
		{"missing", func() error { _, err := v.Stat(ctx, "/nope"); return err }(), wire.CodeNotFound},
		{"escape", func() error { _, err := v.Stat(ctx, "../x"); return err }(), wire.CodeInvalidPath},
		{"read dir", func() error { _, err := v.ReadFile(ctx, "/a", io.Discard); return err }(), wire.CodeIsDir},
		{"mkdir exists", func() error { _, err := v.Mkdir(ctx, "/a", 0, false); return err }(), wire.CodeAlreadyExists},
		{"rm non-empty", func() error { _, err := v.Remove(ctx, "/a", false); return err }(), wire.CodeNotEmpty},
		{"through file", func() error { _, err := v.Stat(ctx, "/a/file/x"); return err }(), wire.CodeNotDir},
		{"copy dir", func() error { _, err := v.Copy(ctx, "/a", "/b", false); return err }(), wire.CodeIsDir},
		{"root", func() error { _, err := v.Remove(ctx, "/", true); return err }(), wire.CodeInvalidPath},
		// DST/ must be a directory, as for mv(1) and cp(1).
		{"move into a missing dir", func() error { _, err := v.Move(ctx, "/a/file", "/nodir/"); return err }(), wire.CodeNotDir},
		{"copy into a missing dir", func() error { _, err := v.Copy(ctx, "/a/file", "/nodir/", false); return err }(), wire.CodeNotDir},
		{"move into a file", func() error { _, err := v.Move(ctx, "/a", "/a/file/"); return err }(), wire.CodeNotDir},
	}
	for _, c := range cases {
		if got := wire.CodeOf(c.err); got != c.code {
			t.Errorf("%s: code %q, want %q (%v)", c.name, got, c.code, c.err)
		}
	}
	if _, err := v.Stat(ctx, "/nodir"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Errorf("a refused move or copy made /nodir: %v", err)
	}
	// Into an existing directory, with or without the slash.
	write(t, v, "/b", "y")
	if _, err := v.Move(ctx, "/b", "/a/"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Copy(ctx, "/a/b", "/", false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/b", "/b", "/a/file"} {
		if _, err := v.Stat(ctx, p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestOpenOrCreateConcurrently: runs that create the default vault at
// once all get it, whole (none sees a file without its schema).
func TestOpenOrCreateConcurrently(t *testing.T) {
	for round := 0; round < 5; round++ {
		dir := t.TempDir()
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				v, err := NewStore(dir, Options{}).OpenOrCreate(context.Background(), DefaultName)
				if err == nil {
					v.Close()
				}
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "vaults")); len(ents) != 1 {
			t.Fatalf("round %d: left %v", round, ents)
		}
	}
}
