package vault

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSyncAppliesHostChanges(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep.txt", "keep")
	write(t, v, "/edit.txt", "0123456789")
	write(t, v, "/gone/x", "x")
	if _, err := v.Symlink(ctx, "keep.txt", "/link"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := v.Export(ctx, "/", dir, false); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	time.Sleep(10 * time.Millisecond)
	m, _ := v.Mark(ctx, "sync")
	// Same size, mtime put back: only the ctime tells.
	p := filepath.Join(dir, "edit.txt")
	fi, _ := os.Stat(p)
	os.WriteFile(p, []byte("ABCDEFGHIJ"), 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	os.RemoveAll(filepath.Join(dir, "gone"))
	os.MkdirAll(filepath.Join(dir, "new", "sub"), 0o750)
	os.WriteFile(filepath.Join(dir, "new", "sub", "f.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Remove(filepath.Join(dir, "link"))
	os.Symlink("edit.txt", filepath.Join(dir, "link"))
	res, err := v.Sync(ctx, dir, since)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, v, "/edit.txt") != "ABCDEFGHIJ" || read(t, v, "/keep.txt") != "keep" || read(t, v, "/new/sub/f.sh") != "#!/bin/sh\n" {
		t.Fatal("content")
	}
	if e, _ := v.Stat(ctx, "/new/sub/f.sh"); e.Mode != 0o755 {
		t.Fatalf("mode %o", e.Mode)
	}
	if e, _ := v.Stat(ctx, "/link"); e.Target != "edit.txt" {
		t.Fatalf("link %+v", e)
	}
	if _, err := v.Stat(ctx, "/gone"); err == nil {
		t.Fatal("/gone kept")
	}
	ch, _ := v.ChangesSince(ctx, m)
	got := map[string]string{}
	for _, c := range ch {
		got[c.Path] = c.Op
	}
	for p, op := range map[string]string{"/edit.txt": "modified", "/gone": "deleted", "/gone/x": "deleted", "/new": "added", "/new/sub": "added", "/new/sub/f.sh": "added", "/link": "modified"} {
		if got[p] != op {
			t.Errorf("%s: %q want %q (%v, %+v)", p, got[p], op, got, res)
		}
	}
	if _, ok := got["/keep.txt"]; ok {
		t.Errorf("unchanged file listed: %v", got)
	}
	mustCheck(t, v)
}
