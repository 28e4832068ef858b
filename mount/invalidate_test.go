package mount

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"avfs/vault"
)

// A checkpoint restored beneath a live writer mount, by the process that
// serves it, is what the mount shows once Invalidate is told the restore's
// changes: a file deleted since comes back (the kernel had a negative entry
// for it), one created since goes, and one rewritten shows its old size
// and bytes (the kernel had its pages). Without Invalidate the kernel's
// caches, trusted for WriterCacheTime, would answer the old state: the
// test checks that first, so it cannot pass by the caches expiring.
func TestInvalidateAfterRestore(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	v, err := vault.Create(ctx, filepath.Join(t.TempDir(), "v.avfs"), "v", vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	dir := t.TempDir()
	sess, err := Mount(ctx, v, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Unmount(true)
	p := func(rel string) string { return filepath.Join(dir, rel) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(p("src/deep"), 0o755))
	must(os.WriteFile(p("src/deep/kept.txt"), []byte("before\n"), 0o644))
	must(os.WriteFile(p("src/gone.txt"), []byte("deleted after the checkpoint\n"), 0o644))
	cp, err := v.SaveCheckpoint(ctx, "cp", "")
	must(err)

	must(os.Remove(p("src/gone.txt")))
	must(os.WriteFile(p("src/new.txt"), []byte("created after\n"), 0o644))
	must(os.WriteFile(p("src/deep/kept.txt"), []byte("after, and longer\n"), 0o644))
	// The kernel now caches: a negative entry for gone.txt, new.txt, and
	// kept.txt's new pages.
	for _, rel := range []string{"src/gone.txt", "src/new.txt", "src/deep/kept.txt"} {
		_, _ = os.ReadFile(p(rel))
	}

	res, err := v.RestoreCheckpoint(ctx, strconv.FormatInt(cp.ID, 10))
	must(err)
	if _, err := os.Stat(p("src/gone.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("before Invalidate, gone.txt: %v; want the kernel's cached ENOENT (else this test proves nothing)", err)
	}
	paths := make([]string, 0, len(res.Changes))
	for _, c := range res.Changes {
		paths = append(paths, c.Path)
	}
	sess.Invalidate(ctx, paths)

	for rel, want := range map[string]string{"src/gone.txt": "deleted after the checkpoint\n", "src/deep/kept.txt": "before\n"} {
		got, err := os.ReadFile(p(rel))
		if err != nil || string(got) != want {
			t.Errorf("%s after Invalidate: %q, %v; want %q", rel, got, err, want)
		}
	}
	if _, err := os.Stat(p("src/new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("new.txt after Invalidate: %v; want it gone", err)
	}
	ents, err := os.ReadDir(p("src"))
	must(err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "deep" || names[1] != "gone.txt" {
		t.Errorf("src lists %v after Invalidate; want [deep gone.txt]", names)
	}
	// Paths the kernel never looked up, and the root, are no trouble.
	sess.Invalidate(ctx, []string{"/", "/never/seen/file", "/src/deep/missing"})
	must(sess.Unmount(false))
	sess.Invalidate(ctx, []string{"/src"}) // unmounted: nothing to do
}
