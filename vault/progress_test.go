package vault

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// progressLog records the calls of a ProgressFunc.
type progressLog struct{ done, total []Work }

func (l *progressLog) fn() ProgressFunc {
	return func(done, total Work) {
		l.done, l.total = append(l.done, done), append(l.total, total)
	}
}

// check fails unless done never decreased, never passed its total, and
// the last call had done equal to the total, which is want (a zero field
// of want is not checked).
func (l *progressLog) check(t *testing.T, want Work) {
	t.Helper()
	if len(l.done) < 2 {
		t.Fatalf("%d calls, want a first and a last at least", len(l.done))
	}
	for i := range l.done {
		d, tot := l.done[i], l.total[i]
		if i > 0 && (d.Items < l.done[i-1].Items || d.Bytes < l.done[i-1].Bytes) {
			t.Fatalf("call %d: done %+v after %+v", i, d, l.done[i-1])
		}
		if tot.Items != 0 && d.Items > tot.Items || tot.Bytes != 0 && d.Bytes > tot.Bytes {
			t.Fatalf("call %d: done %+v past the total %+v", i, d, tot)
		}
	}
	last, lastTotal := l.done[len(l.done)-1], l.total[len(l.total)-1]
	if last != lastTotal {
		t.Fatalf("the last call: done %+v, total %+v", last, lastTotal)
	}
	if want.Items != 0 && last.Items != want.Items || want.Bytes != 0 && last.Bytes != want.Bytes {
		t.Fatalf("the last call: %+v, want %+v", last, want)
	}
	if first := l.total[0]; want.Items != 0 && first.Items != want.Items {
		t.Fatalf("the first total: %+v, want %+v (known from the start)", first, want)
	}
}

func TestProgress(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	// A host tree: 3 directories, 4 files (one with two names), a symlink.
	host := filepath.Join(t.TempDir(), "tree")
	for p, content := range map[string]string{"a.txt": "aaaa", "sub/b.txt": strings.Repeat("b", 3*ChunkSize), "sub/deep/c.txt": "c"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(host, "a.txt"), filepath.Join(host, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(host, "l")); err != nil {
		t.Fatal(err)
	}
	treeBytes := int64(4 + 3*ChunkSize + 1)

	for _, tc := range []struct {
		name string
		run  func(ProgressFunc) error
		want Work
	}{
		{"import", func(f ProgressFunc) error {
			_, err := v.ImportWith(ctx, host, "/tree", ImportOptions{Progress: f})
			return err
		}, Work{Items: 8, Bytes: treeBytes}},
		{"export", func(f ProgressFunc) error {
			_, err := v.ExportWith(ctx, "/tree", filepath.Join(t.TempDir(), "out"), ExportOptions{Progress: f})
			return err
		}, Work{Items: 8, Bytes: treeBytes}},
		{"restore", func(f ProgressFunc) error {
			if _, err := v.SaveCheckpoint(ctx, "one", ""); err != nil {
				return err
			}
			write(t, v, "/tree/a.txt", "changed")
			write(t, v, "/tree/new.txt", "new")
			_, err := v.RestoreCheckpointWith(ctx, "one", RestoreOptions{Progress: f})
			return err
		}, Work{Items: 3}}, // a.txt, new.txt and their directory
		{"detach", func(f ProgressFunc) error {
			fork, err := s.Fork(ctx, "t", "f")
			if err != nil {
				return err
			}
			write(t, fork, "/own.txt", "the fork's own")
			fork.Close()
			return s.DetachWith(ctx, "f", DetachOptions{Progress: f})
		}, Work{Items: 4, Bytes: 4 + ChunkSize + 1}}, // a.txt, b.txt's one distinct chunk, c.txt, own.txt; own.txt is not copied
		{"gc", func(f ProgressFunc) error {
			_, err := v.GCWith(ctx, GCOptions{Progress: f})
			return err
		}, Work{Items: gcSteps}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l progressLog
			if err := tc.run(l.fn()); err != nil {
				t.Fatal(err)
			}
			l.check(t, tc.want)
		})
	}
	// Without a ProgressFunc the work is the same.
	var got bytes.Buffer
	if _, err := v.ImportWith(ctx, host, "/again", ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ReadFile(ctx, "/again/sub/b.txt", &got); err != nil || got.Len() != 3*ChunkSize {
		t.Fatalf("import without progress: %v, %d bytes", err, got.Len())
	}
}
