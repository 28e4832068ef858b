package vault

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"avfs/wire"
)

// snapshot describes every entry of a host tree: kind, mode and content
// or link target, by relative path.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		}
		got[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var diff []string
	for k, w := range want {
		if got[k] != w {
			diff = append(diff, k+": "+got[k]+" (was "+w+")")
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, k+": "+g+" (new)")
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%s changed:\n%s", what, strings.Join(diff, "\n"))
	}
}

// TestExportNeverWritesOutsideTheDestination plays what an agent writing
// into a vault could try against a later `export --force` into the same
// destination: a first export plants links (from the vault, or on the
// host), the vault is then changed so that the second export would write
// through them. Nothing outside the destination may change, and what the
// vault has must end up in the destination itself.
func TestExportNeverWritesOutsideTheDestination(t *testing.T) {
	ctx := context.Background()
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		first  func(t *testing.T, v *Vault, outside string) // the vault of the first export
		plant  func(t *testing.T, dst, outside string)      // on the host, between the exports
		second func(t *testing.T, v *Vault)                 // the vault of the second export
		want   map[string]string                            // entries of the destination after it
	}{
		{
			name: "symlink where the vault now has a directory",
			first: func(t *testing.T, v *Vault, outside string) {
				_, err := v.Symlink(ctx, outside, "/e")
				must(t, err)
			},
			second: func(t *testing.T, v *Vault) {
				_, err := v.Remove(ctx, "/e", false)
				must(t, err)
				_, err = v.Mkdir(ctx, "/e", 0o777, false)
				must(t, err)
				write(t, v, "/e/passwd", "EVIL")
			},
			want: map[string]string{"e": "drwxrwxrwx", "e/passwd": "-rw-r--r-- EVIL"},
		},
		{
			name: "symlinked intermediate directory",
			first: func(t *testing.T, v *Vault, outside string) {
				_, err := v.Mkdir(ctx, "/d", 0o755, false)
				must(t, err)
				_, err = v.Symlink(ctx, outside, "/d/sub")
				must(t, err)
			},
			second: func(t *testing.T, v *Vault) {
				_, err := v.Remove(ctx, "/d/sub", false)
				must(t, err)
				write(t, v, "/d/sub/x/y", "EVIL")
				write(t, v, "/d/sub/passwd", "EVIL")
				_, err = v.Chmod(ctx, "/d/sub", 0o777)
				must(t, err)
			},
			want: map[string]string{"d": "drwxr-xr-x", "d/sub": "drwxrwxrwx", "d/sub/x": "drwxr-xr-x", "d/sub/x/y": "-rw-r--r-- EVIL", "d/sub/passwd": "-rw-r--r-- EVIL"},
		},
		{
			name: "symlink where the vault now has a file",
			first: func(t *testing.T, v *Vault, outside string) {
				_, err := v.Symlink(ctx, filepath.Join(outside, "passwd"), "/passwd")
				must(t, err)
			},
			second: func(t *testing.T, v *Vault) {
				_, err := v.Remove(ctx, "/passwd", false)
				must(t, err)
				write(t, v, "/passwd", "EVIL")
				_, err = v.Chmod(ctx, "/passwd", 0o666)
				must(t, err)
			},
			want: map[string]string{"passwd": "-rw-rw-rw- EVIL"},
		},
		{
			name: "host hard link to an outside file at a file's place",
			first: func(t *testing.T, v *Vault, outside string) {
				write(t, v, "/passwd", "first")
			},
			plant: func(t *testing.T, dst, outside string) {
				must(t, os.Remove(filepath.Join(dst, "passwd")))
				must(t, os.Link(filepath.Join(outside, "passwd"), filepath.Join(dst, "passwd")))
			},
			second: func(t *testing.T, v *Vault) { write(t, v, "/passwd", "EVIL") },
			want:   map[string]string{"passwd": "-rw-r--r-- EVIL"},
		},
		{
			name: "vault hard link whose first name sits under a planted symlink",
			first: func(t *testing.T, v *Vault, outside string) {
				_, err := v.Symlink(ctx, outside, "/a")
				must(t, err)
			},
			second: func(t *testing.T, v *Vault) {
				_, err := v.Remove(ctx, "/a", false)
				must(t, err)
				write(t, v, "/a/passwd", "EVIL")
				a, _ := v.Stat(ctx, "/a/passwd")
				root, _ := v.Stat(ctx, "/")
				_, err = v.Link(ctx, a.Ino, root.Ino, "b")
				must(t, err)
			},
			want: map[string]string{"a": "drwxr-xr-x", "a/passwd": "-rw-r--r-- EVIL", "b": "-rw-r--r-- EVIL"},
		},
		{
			name: "directory holding a symlink where the vault now has a file",
			first: func(t *testing.T, v *Vault, outside string) {
				_, err := v.Mkdir(ctx, "/x", 0o755, false)
				must(t, err)
				_, err = v.Symlink(ctx, outside, "/x/out")
				must(t, err)
			},
			second: func(t *testing.T, v *Vault) {
				_, err := v.Remove(ctx, "/x", true)
				must(t, err)
				write(t, v, "/x", "EVIL")
			},
			want: map[string]string{"x": "-rw-r--r-- EVIL"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachResolver(t, func(t *testing.T) {
				_, v := newVault(t)
				outside := t.TempDir()
				must(t, os.WriteFile(filepath.Join(outside, "passwd"), []byte("orig"), 0o644))
				must(t, os.Chmod(outside, 0o755))
				before := snapshot(t, outside)
				dst := filepath.Join(t.TempDir(), "exp")
				tc.first(t, v, outside)
				_, err := v.Export(ctx, "/", dst, false)
				must(t, err)
				if tc.plant != nil {
					tc.plant(t, dst, outside)
				}
				tc.second(t, v)
				_, err = v.Export(ctx, "/", dst, true)
				sameTree(t, "outside the destination", snapshot(t, outside), before)
				must(t, err)
				want := map[string]string{".": "drwxr-xr-x"}
				for k, w := range tc.want {
					want[k] = w
				}
				sameTree(t, "destination", snapshot(t, dst), want)
			})
		})
	}
}

// TestExportSetid checks that setuid and setgid bits of files are dropped
// unless asked for, and that sticky bits and directory modes stay.
func TestExportSetid(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		path     string
		mode     uint32
		preserve bool
		want     fs.FileMode
	}{
		{"setuid file", "/f", 0o4755, false, 0o755},
		{"setgid file", "/f", 0o2711, false, 0o711},
		{"setuid and setgid file", "/f", 0o6755, false, 0o755},
		{"sticky file", "/f", 0o1755, false, 0o755 | fs.ModeSticky},
		{"setuid file kept", "/f", 0o4755, true, 0o755 | fs.ModeSetuid},
		{"setgid file kept", "/f", 0o2755, true, 0o755 | fs.ModeSetgid},
		{"sticky directory", "/d", 0o1777, false, 0o777 | fs.ModeSticky | fs.ModeDir},
		{"setgid directory", "/d", 0o2775, false, 0o775 | fs.ModeSetgid | fs.ModeDir},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, v := newVault(t)
			if tc.path == "/d" {
				if _, err := v.Mkdir(ctx, "/d", 0o755, false); err != nil {
					t.Fatal(err)
				}
			} else {
				write(t, v, tc.path, "#!/bin/sh\n")
			}
			if _, err := v.Chmod(ctx, tc.path, tc.mode); err != nil {
				t.Fatal(err)
			}
			for _, top := range []string{"/", tc.path} { // a tree and the entry alone
				dst := filepath.Join(t.TempDir(), "out")
				if _, err := v.ExportWith(ctx, top, dst, ExportOptions{PreserveSetid: tc.preserve}); err != nil {
					t.Fatal(err)
				}
				hp := dst
				if top == "/" {
					hp = filepath.Join(dst, tc.path)
				}
				fi, err := os.Lstat(hp)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != tc.want {
					t.Errorf("export of %s: mode %v, want %v", top, fi.Mode(), tc.want)
				}
			}
		})
	}
}

// TestExportDestinationRoot checks what is followed of the destination
// itself: the directory named (a person typed it, symlinks and all), but
// never an entry in the place of an exported file.
func TestExportDestinationRoot(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/f", "new")
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "via")); err != nil {
		t.Fatal(err)
	}
	// A symlinked destination directory is merged into, with --force.
	if _, err := v.Export(ctx, "/", filepath.Join(base, "via"), false); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("export onto an existing link without force: %v", err)
	}
	if _, err := v.Export(ctx, "/", filepath.Join(base, "via"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(real, "f")); string(b) != "new" {
		t.Fatalf("through the named directory: %q", b)
	}
	// A path through a symlinked parent is followed too.
	if _, err := v.Export(ctx, "/f", filepath.Join(base, "via", "g"), false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(real, "g")); string(b) != "new" {
		t.Fatalf("through a symlinked parent: %q", b)
	}
	// A symlink named as the file to write is replaced, not written through.
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("orig"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(real, "h")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Export(ctx, "/f", filepath.Join(real, "h"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "orig" {
		t.Fatalf("written through the link named: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(real, "h")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("link named not replaced by the file: %v %v", fi, err)
	}
}
