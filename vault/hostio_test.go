package vault

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"avfs/wire"
)

func TestImportExportKeepsModesLinksAndTimes(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	src := t.TempDir()
	mt := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "bin"), 0o750))
	must(os.WriteFile(filepath.Join(src, "bin", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, "data.bin"), randBytes(200000), 0o600))
	must(os.Symlink("bin/run.sh", filepath.Join(src, "link")))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "outside"))) // stored as a link, never followed
	must(os.Chtimes(filepath.Join(src, "data.bin"), mt, mt))
	must(os.Link(filepath.Join(src, "bin", "run.sh"), filepath.Join(src, "run-again.sh")))
	res, err := v.Import(ctx, src, "/proj")
	must(err)
	if res.Files != 3 || res.Symlinks != 2 || res.Dirs != 2 {
		t.Fatalf("import counts %+v", res)
	}
	// Hard links stay hard links, in and out; importing again changes nothing.
	for range 2 {
		a, _ := v.Stat(ctx, "/proj/bin/run.sh")
		b, _ := v.Stat(ctx, "/proj/run-again.sh")
		if a.Ino != b.Ino || a.Nlink != 2 {
			t.Fatalf("hard link imported as %+v and %+v", a, b)
		}
		_, err = v.Import(ctx, src, "/proj")
		must(err)
	}
	if e, _ := v.Stat(ctx, "/proj/bin/run.sh"); e.Mode != 0o755 {
		t.Fatalf("exec bit lost: %o", e.Mode)
	}
	if e, _ := v.Stat(ctx, "/proj/outside"); e.Kind != KindSymlink || e.Target != "/etc/passwd" {
		t.Fatalf("outside link %+v", e)
	}
	if e, _ := v.Stat(ctx, "/proj/data.bin"); !e.Mtime.Equal(mt) || e.Mode != 0o600 {
		t.Fatalf("data.bin %+v", e)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := v.Export(ctx, "/proj", dst, false); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"bin/run.sh", "data.bin"} {
		a, _ := os.ReadFile(filepath.Join(src, rel))
		b, _ := os.ReadFile(filepath.Join(dst, rel))
		if string(a) != string(b) {
			t.Fatalf("%s differs", rel)
		}
		fa, _ := os.Stat(filepath.Join(src, rel))
		fb, _ := os.Stat(filepath.Join(dst, rel))
		if fa.Mode() != fb.Mode() || !fa.ModTime().Equal(fb.ModTime()) {
			t.Fatalf("%s: mode/mtime %v %v / %v %v", rel, fa.Mode(), fa.ModTime(), fb.Mode(), fb.ModTime())
		}
	}
	fa, _ := os.Stat(filepath.Join(dst, "bin", "run.sh"))
	fb, _ := os.Stat(filepath.Join(dst, "run-again.sh"))
	if !os.SameFile(fa, fb) {
		t.Fatal("export made two files of one inode")
	}
	if target, _ := os.Readlink(filepath.Join(dst, "link")); target != "bin/run.sh" {
		t.Fatalf("link target %q", target)
	}
	if _, err := v.Export(ctx, "/proj", dst, false); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("export over existing: %v", err)
	}
	if _, err := v.Export(ctx, "/proj", dst, true); err != nil {
		t.Fatalf("export --force: %v", err)
	}
	if _, err := v.Import(ctx, src, "../escape"); !wire.HasCode(err, wire.CodeInvalidPath) {
		t.Fatalf("import escaping path: %v", err)
	}
	mustCheck(t, v)
}
