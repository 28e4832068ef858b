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

// TestSyncKeepsHardLinks checks that Export makes hard links of a vault
// file's names, and that Sync applies what the host did with them.
func TestSyncKeepsHardLinks(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/a", "data\n")
	if _, err := v.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	a, _ := v.Stat(ctx, "/a")
	d, _ := v.Stat(ctx, "/d")
	if _, err := v.Link(ctx, a.Ino, d.Ino, "b"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := v.Export(ctx, "/", dir, false); err != nil {
		t.Fatal(err)
	}
	host := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	fa, _ := os.Stat(host("/a"))
	fb, _ := os.Stat(host("/d/b"))
	if !os.SameFile(fa, fb) {
		t.Fatal("export made two files of one inode")
	}
	sync := func(what string, change func()) []Change {
		t.Helper()
		since := time.Now()
		time.Sleep(10 * time.Millisecond)
		m, err := v.Mark(ctx, what)
		if err != nil {
			t.Fatal(err)
		}
		change()
		if _, err := v.Sync(ctx, dir, since); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ch, err := v.ChangesSince(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		mustCheck(t, v)
		return ch
	}
	names := func(p ...string) (inos []uint64, nlinks []uint32) {
		for _, x := range p {
			e, err := v.Stat(ctx, x)
			if err != nil {
				t.Fatalf("%s: %v", x, err)
			}
			inos, nlinks = append(inos, e.Ino), append(nlinks, e.Nlink)
		}
		return inos, nlinks
	}

	// Written through one name: the vault inode changes once, for both.
	ch := sync("append", func() {
		f, _ := os.OpenFile(host("/a"), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString("more\n")
		f.Close()
	})
	if read(t, v, "/d/b") != "data\nmore\n" || read(t, v, "/a") != "data\nmore\n" {
		t.Fatalf("after append: %q %q", read(t, v, "/a"), read(t, v, "/d/b"))
	}
	if inos, nl := names("/a", "/d/b"); inos[0] != inos[1] || nl[0] != 2 {
		t.Fatalf("after append: inodes %v links %v", inos, nl)
	}
	if len(ch) != 1 || ch[0].Path != "/a" || ch[0].Op != "modified" {
		t.Fatalf("after append: changes %+v", ch)
	}

	// A link made on the host is made in the vault.
	sync("link", func() { os.Link(host("/a"), host("/c")) })
	if inos, nl := names("/a", "/c"); inos[0] != inos[1] || nl[0] != 3 {
		t.Fatalf("after link: inodes %v links %v", inos, nl)
	}

	// A name replaced on the host (as sed -i does) leaves the others alone.
	sync("replace", func() {
		os.WriteFile(host("/d/b.tmp"), []byte("other\n"), 0o644)
		os.Rename(host("/d/b.tmp"), host("/d/b"))
	})
	if read(t, v, "/d/b") != "other\n" || read(t, v, "/a") != "data\nmore\n" || read(t, v, "/c") != "data\nmore\n" {
		t.Fatalf("after replace: %q %q %q", read(t, v, "/a"), read(t, v, "/d/b"), read(t, v, "/c"))
	}
	if inos, nl := names("/a", "/d/b", "/c"); inos[0] == inos[1] || inos[0] != inos[2] || nl[0] != 2 || nl[1] != 1 {
		t.Fatalf("after replace: inodes %v links %v", inos, nl)
	}

	// A linked name replaced by a directory or a symlink.
	sync("kind", func() {
		os.Link(host("/c"), host("/e"))
		os.Link(host("/c"), host("/s"))
	})
	sync("replace kinds", func() {
		os.Remove(host("/e"))
		os.Mkdir(host("/e"), 0o755)
		os.Remove(host("/s"))
		os.Symlink("c", host("/s"))
	})
	if e, err := v.Stat(ctx, "/e"); err != nil || e.Kind != KindDir {
		t.Fatalf("/e: %+v %v", e, err)
	}
	if e, err := v.Stat(ctx, "/s"); err != nil || e.Kind != KindSymlink || e.Target != "c" {
		t.Fatalf("/s: %+v %v", e, err)
	}
	if _, nl := names("/a", "/c"); nl[0] != 2 || nl[1] != 2 {
		t.Fatalf("after replace kinds: links %v", nl)
	}

	// Removing one name keeps the other, and reports only the one removed.
	ch = sync("remove", func() { os.Remove(host("/a")) })
	if read(t, v, "/c") != "data\nmore\n" {
		t.Fatalf("after remove: %q", read(t, v, "/c"))
	}
	if _, nl := names("/c"); nl[0] != 1 {
		t.Fatalf("after remove: links %v", nl)
	}
	if len(ch) != 1 || ch[0].Path != "/a" || ch[0].Op != "deleted" {
		t.Fatalf("after remove: changes %+v", ch)
	}
}
