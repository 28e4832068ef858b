package vault

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"avfs/wire"
)

// contentOf reads r whole ("<none>" for nil).
func contentOf(t *testing.T, r *FileReader) string {
	t.Helper()
	if r == nil {
		return "<none>"
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDiffContent(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/edit.txt", "v1\n")
	write(t, v, "/gone.txt", "bye\n")
	write(t, v, "/src/a.go", "package a\n")
	write(t, v, "/touched.txt", "same\n")
	if _, err := v.Symlink(ctx, "edit.txt", "/link"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint(ctx, "one", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/edit.txt", "v2\n")
	write(t, v, "/src/a.go", "package a // changed\n")
	write(t, v, "/src/b.go", "package b\n")
	write(t, v, "/touched.txt", "same\n")
	if _, err := v.Remove(ctx, "/gone.txt", false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Remove(ctx, "/link", false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Symlink(ctx, "src/a.go", "/link"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint(ctx, "two", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/edit.txt", "v3\n")

	type seen struct{ op, before, after string }
	for _, tc := range []struct {
		name, from, to, under string
		want                  map[string]seen
	}{
		{"checkpoints", "one", "two", "", map[string]seen{
			"/edit.txt":    {"modified", "v1\n", "v2\n"},
			"/gone.txt":    {"deleted", "bye\n", "<none>"},
			"/link":        {"modified", "edit.txt", "src/a.go"},
			"/touched.txt": {"modified", "same\n", "same\n"}, // rewritten: its mtime changed
			"/src/a.go":    {"modified", "package a\n", "package a // changed\n"},
			"/src/b.go":    {"added", "<none>", "package b\n"},
		}},
		{"under a directory", "one", "two", "/src", map[string]seen{
			"/src/a.go": {"modified", "package a\n", "package a // changed\n"},
			"/src/b.go": {"added", "<none>", "package b\n"},
		}},
		{"under a file", "one", "two", "src/b.go", map[string]seen{
			"/src/b.go": {"added", "<none>", "package b\n"},
		}},
		{"a prefix is not a directory", "one", "two", "/src/a", map[string]seen{}},
		{"to the current state", "two", "", "/", map[string]seen{
			"/edit.txt": {"modified", "v2\n", "v3\n"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]seen{}
			var order []string
			err := v.DiffContent(ctx, tc.from, tc.to, tc.under, func(c ContentChange) error {
				got[c.Path] = seen{c.Op, contentOf(t, c.Before), contentOf(t, c.After)}
				order = append(order, c.Path)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for p, w := range tc.want {
				if got[p] != w {
					t.Errorf("%s: got %+v, want %+v", p, got[p], w)
				}
			}
			for i := 1; i < len(order); i++ {
				if order[i-1] > order[i] {
					t.Errorf("not in path order: %q", order)
				}
			}
		})
	}

	// One snapshot: a write while fn runs is not seen.
	err := v.DiffContent(ctx, "two", "", "", func(c ContentChange) error {
		write(t, v, "/edit.txt", "v4\n")
		if got := contentOf(t, c.After); got != "v3\n" {
			t.Errorf("after a write during the walk: %q, want the snapshot's v3", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// fn's error comes back as it is; the readers are closed after fn.
	stop := errors.New("stop")
	var kept *FileReader
	if err := v.DiffContent(ctx, "one", "two", "", func(c ContentChange) error { kept = c.Before; return stop }); err != stop {
		t.Fatalf("fn's error: got %v", err)
	}
	if _, err := kept.Read(make([]byte, 1)); !wire.HasCode(err, wire.CodeInternal) {
		t.Fatalf("a reader kept past fn: %v", err)
	}
	for _, tc := range []struct {
		from, to, under string
		code            wire.Code
	}{
		{"nope", "", "", wire.CodeCheckpointNotFound},
		{"one", "nope", "", wire.CodeCheckpointNotFound},
		{"one", "", "/a/../..", wire.CodeInvalidPath},
	} {
		err := v.DiffContent(ctx, tc.from, tc.to, tc.under, func(ContentChange) error { return nil })
		if !wire.HasCode(err, tc.code) {
			t.Errorf("DiffContent(%q, %q, %q): %v, want %s", tc.from, tc.to, tc.under, err, tc.code)
		}
	}
}

func TestSameContent(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/a", "one\n")
	write(t, v, "/a", strings.Repeat("x", ChunkSize+1))
	write(t, v, "/a", "one\n")
	if _, err := v.Symlink(ctx, "t", "/l"); err != nil {
		t.Fatal(err)
	}
	open := func(p string, n int64) *FileReader {
		r, err := v.OpenVersion(ctx, p, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	for _, tc := range []struct {
		name string
		a, b *FileReader
		want bool
	}{
		{"same bytes, same chunks", open("/a", 1), open("/a", 3), true},
		{"other bytes", open("/a", 1), open("/a", 2), false},
		{"same symlink target", open("/l", 1), open("/l", 1), true},
		{"a target and a file", open("/l", 1), open("/a", 1), false},
	} {
		if got := tc.a.SameContent(tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
