package mount

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"

	"avfs/vault"
)

// vaultHas reports whether path exists in the vault (what the serving
// process has committed).
func vaultHas(t *testing.T, v *vault.Vault, p string) bool {
	t.Helper()
	_, err := v.Stat(context.Background(), p)
	return err == nil
}

// A new file is committed, with its first content, when it is first
// flushed: one transaction, one version. Until then the mount answers for
// it, and any request that could see it from elsewhere commits it first.
func TestCreateCommitsAtFirstFlush(t *testing.T) {
	s := serve(t, false)
	ctx := context.Background()
	if err := mkdir(s.path("d")); err != nil {
		t.Fatal(err)
	}

	// Written and closed: one version, "create", with the content.
	if err := os.WriteFile(s.path("d/a"), []byte("alpha"), 0o640); err != nil {
		t.Fatal(err)
	}
	vers, err := s.v.Log(ctx, "/d/a")
	if err != nil || len(vers) != 1 || vers[0].Op != "create" || vers[0].Size != 5 {
		t.Fatalf("history of /d/a: %+v, %v; want one create of 5 bytes", vers, err)
	}

	// Open and written, not closed: not in the vault yet, but its own
	// handle and fstat see the writes.
	f, err := os.OpenFile(s.path("d/b"), os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("bravo!")); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 6 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("fstat of the new file: %v, %v", fi, err)
	}
	if vaultHas(t, s.v, "/d/b") {
		t.Fatal("the new file is in the vault before its first flush")
	}
	// Listing the directory (another process) commits it: it is there,
	// empty until its flush.
	out, err := exec.Command("ls", s.path("d")).Output()
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(string(out))
	sort.Strings(names)
	if strings.Join(names, " ") != "a b" {
		t.Fatalf("ls: %q, want a b", names)
	}
	if !vaultHas(t, s.v, "/d/b") {
		t.Fatal("listing the directory did not commit the new file")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(readVault(t, s.v, "/d/b")); got != "bravo!" {
		t.Fatalf("/d/b = %q after close", got)
	}

	// Created and closed without a write (touch): an empty file.
	if err := exec.Command("touch", s.path("d/c")).Run(); err != nil {
		t.Fatal(err)
	}
	if fi, err := s.v.Stat(ctx, "/d/c"); err != nil || fi.Size != 0 {
		t.Fatalf("touched file in the vault: %+v, %v", fi, err)
	}

	// Changes to a new file before its flush land, and so does its
	// content: a rename, a chmod, a hard link.
	for _, c := range []struct {
		name   string
		change func(f *os.File) error
		path   string
		mode   os.FileMode
	}{
		{"rename", func(*os.File) error { return os.Rename(s.path("d/r"), s.path("d/r2")) }, "/d/r2", 0o644},
		{"chmod", func(f *os.File) error { return f.Chmod(0o755) }, "/d/m", 0o755},
		{"link", func(*os.File) error { return os.Link(s.path("d/l"), s.path("d/l2")) }, "/d/l2", 0o644},
	} {
		src := map[string]string{"rename": "d/r", "chmod": "d/m", "link": "d/l"}[c.name]
		// The kernel now knows the target names are missing: the change
		// reaches the mount without a lookup first.
		os.Stat(s.path("d/r2"))
		os.Stat(s.path("d/l2"))
		g, err := os.OpenFile(s.path(src), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		g.Write([]byte("echo"))
		if err := c.change(g); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if e, err := s.v.Stat(ctx, c.path); err != nil || uint32(e.Mode) != uint32(c.mode) || e.Size != 4 {
			t.Fatalf("%s: %s = %+v, %v", c.name, c.path, e, err)
		}
	}

	// Removed while open and not flushed: readable through its handle,
	// and gone for good after close.
	h, err := os.OpenFile(s.path("d/gone"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	h.Write([]byte("ghost"))
	if err := os.Remove(s.path("d/gone")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != "ghost" {
		t.Fatalf("read after unlink: %q, %v", buf, err)
	}
	h.Close()
	if vaultHas(t, s.v, "/d/gone") {
		t.Fatal("a removed file came back at close")
	}

	// fsync of the directory commits a file still open.
	k, err := os.Create(s.path("d/k"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(s.path("d"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Sync(); err != nil {
		t.Fatal(err)
	}
	dir.Close()
	if !vaultHas(t, s.v, "/d/k") {
		t.Fatal("fsync of the directory left the new file out of the vault")
	}
	k.Close()
	s.stop()
	s.mustCheck()
}

// A file created in a mount whose server is killed before the file was
// flushed is not in the vault, like its unflushed writes, and the vault
// stays consistent; files flushed before are kept.
func TestKillBeforeFirstFlush(t *testing.T) {
	s := serve(t, false)
	if err := os.WriteFile(s.path("kept"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(s.path("open"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("unflushed"))
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
	f.Close()
	s.mustCheck()
	if got := string(readVault(t, s.v, "/kept")); got != "kept" {
		t.Fatalf("/kept = %q", got)
	}
	if vaultHas(t, s.v, "/open") {
		t.Fatal("a file never flushed is in the vault")
	}
	// The next mount works, and numbers given to lost files are not a
	// problem for new ones.
	s.start(false)
	if err := os.WriteFile(s.path("open"), []byte("again"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.stop()
	if got := string(readVault(t, s.v, "/open")); got != "again" {
		t.Fatalf("/open = %q", got)
	}
	s.mustCheck()
}

// With a quota on the number of files, a create is committed at once, so
// that it fails at open(2) with EDQUOT, as before.
func TestCreateWithFileQuotaFailsAtOpen(t *testing.T) {
	s := serve(t, false)
	one := int64(1)
	if _, err := s.v.SetQuota(context.Background(), vault.QuotaChange{MaxFiles: &one}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path("first"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(s.path("second"))
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, syscall.EDQUOT) && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create past the file quota: %v, want EDQUOT", err)
	}
}
