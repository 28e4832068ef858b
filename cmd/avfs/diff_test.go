package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// diffOut runs avfs diff with args and returns stdout; it fails the test
// unless the exit status is code.
func (a *avfs) diffOut(code int, args ...string) string {
	a.t.Helper()
	r := a.exec(nil, append([]string{"diff"}, args...)...)
	if r.code != code {
		a.t.Fatalf("avfs diff %q: exit %d, want %d: %s %s", args, r.code, code, r.stdout, r.stderr)
	}
	return string(r.stdout)
}

func TestDiffVersions(t *testing.T) {
	a := newAVFS(t)
	a.write("one\ntwo\nthree\n", "/notes.txt")                // 1
	a.write("one\ntwo\nthree\nfour\n", "/notes.txt")          // 2
	a.write("one\nTWO\nthree\nfour", "/notes.txt")            // 3
	a.write("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "/counts.txt") // 1
	a.write("1\n2\n3\n4\n5\nsix\n7\n8\n9\n10\n", "/counts.txt")
	a.write("bye\n", "/gone.txt")
	a.ok("rm", "/gone.txt")
	a.write("moved\n", "/was.txt")
	a.ok("mv", "/was.txt", "/now.txt")
	a.write("moved, then changed\n", "/now.txt")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the latest against the one before", []string{"/notes.txt"},
			"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,4 +1,4 @@\n one\n-two\n+TWO\n three\n-four\n+four\n\\ No newline at end of file\n"},
		{"--from", []string{"/notes.txt", "--from", "1"},
			"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n three\n+four\n\\ No newline at end of file\n"},
		{"--from and --to", []string{"--from", "1", "--to", "2", "/notes.txt"},
			"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,4 @@\n one\n two\n three\n+four\n"},
		{"--to alone: what that version changed", []string{"/notes.txt", "--to", "2"},
			"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,4 @@\n one\n two\n three\n+four\n"},
		{"backwards", []string{"/notes.txt", "--from", "2", "--to", "1"},
			"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,4 +1,3 @@\n one\n two\n three\n-four\n"},
		{"the first version: created", []string{"/notes.txt", "--to", "1"},
			"diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,3 @@\n+one\n+two\n+three\n"},
		{"the same version", []string{"/notes.txt", "--from", "2", "--to", "2"}, ""},
		{"-U 1", []string{"-U", "1", "/counts.txt"},
			"diff --git a/counts.txt b/counts.txt\n--- a/counts.txt\n+++ b/counts.txt\n@@ -5,3 +5,3 @@\n 5\n-6\n+six\n 7\n"},
		{"--unified=0", []string{"--unified=0", "/counts.txt"},
			"diff --git a/counts.txt b/counts.txt\n--- a/counts.txt\n+++ b/counts.txt\n@@ -6 +6 @@\n-6\n+six\n"},
		{"a version recorded under another path", []string{"/now.txt", "--from", "1"},
			"diff --git a/was.txt b/now.txt\nrename from was.txt\nrename to now.txt\n--- a/was.txt\n+++ b/now.txt\n@@ -1 +1 @@\n-moved\n+moved, then changed\n"},
		{"a deleted file", []string{"/gone.txt"},
			"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.diffOut(0, tc.args...); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"/notes.txt", "--from", "9"}, 1, "version_not_found"},
		{[]string{"/notes.txt", "--to", "9"}, 1, "version_not_found"},
		{[]string{"/nothing.txt"}, 1, "not_found"},
		{[]string{"/"}, 1, "version_not_found"}, // a directory has no versions
		{[]string{"/notes.txt", "--from", "0"}, 2, "usage"},
		{[]string{"/notes.txt", "--to", "x"}, 2, "usage"},
		{[]string{"/notes.txt", "-U", "-1"}, 2, "usage"},
		{[]string{}, 2, "usage"},
		{[]string{"--checkpoint", "x", "--from", "1"}, 2, "usage"},
		{[]string{"--checkpoint", "nope"}, 1, "checkpoint_not_found"},
	} {
		a.fail(tc.exit, tc.code, append([]string{"diff"}, tc.args...)...)
	}
}

// diffHosts exports the vault to a new host directory and returns it.
func (a *avfs) exportTo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	a.ok("export", "/", dir)
	return dir
}

// A checkpoint diff is a patch git apply takes: applied to the tree at the
// checkpoint it gives the tree now (files, symlinks and modes). Then, the
// limit to a PATH, --to B and --stat.
func TestDiffCheckpoints(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	a := newAVFS(t)
	a.write("package a\n\nfunc A() {}\n", "/src/a.go", "--parents")
	a.write("unchanged\n", "/src/same.go")
	a.write("old\n", "/old.txt")
	a.write("#!/bin/sh\necho hi\n", "/run.sh")
	a.write("no newline", "/tail.txt")
	a.ok("ln", "-s", "old.txt", "/link")
	a.ok("checkpoint", "save", "one")
	before := a.exportTo(t)

	a.write("package a\n\n// A does nothing.\nfunc A() {}\n", "/src/a.go")
	a.write("new file\n", "/src/new.go")
	a.ok("rm", "/old.txt")
	a.ok("chmod", "755", "/run.sh")
	a.write("no newline, still", "/tail.txt")
	a.ok("rm", "/link")
	a.ok("ln", "-s", "src/a.go", "/link")
	a.write("unchanged\n", "/src/same.go") // rewritten as it was: not a difference
	after := a.exportTo(t)

	patch := a.diffOut(0, "--checkpoint", "one")
	for _, want := range []string{"diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
		"diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n", "new file mode 100644\n--- /dev/null\n+++ b/src/new.go\n"} {
		if !strings.Contains(patch, want) {
			t.Errorf("the diff has no %q:\n%s", want, patch)
		}
	}
	if strings.Contains(patch, "same.go") {
		t.Errorf("a file rewritten as it was is in the diff:\n%s", patch)
	}
	cmd := exec.Command("git", "apply", "--unsafe-paths", "-v", "-")
	cmd.Dir, cmd.Stdin = before, strings.NewReader(patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, patch)
	}
	if got, want := treeOf(t, before), treeOf(t, after); !reflect.DeepEqual(got, want) {
		t.Errorf("the patched tree:\n%v\nthe tree now:\n%v", got, want)
	}

	a.ok("checkpoint", "save", "two")
	a.write("later\n", "/src/new.go")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"limited to a directory", []string{"--checkpoint", "one", "/src", "--to", "two"},
			"diff --git a/src/a.go b/src/a.go\n--- a/src/a.go\n+++ b/src/a.go\n@@ -1,3 +1,4 @@\n package a\n \n+// A does nothing.\n func A() {}\n" +
				"diff --git a/src/new.go b/src/new.go\nnew file mode 100644\n--- /dev/null\n+++ b/src/new.go\n@@ -0,0 +1 @@\n+new file\n"},
		{"limited to a file", []string{"--checkpoint", "one", "src/new.go", "--to", "two"},
			"diff --git a/src/new.go b/src/new.go\nnew file mode 100644\n--- /dev/null\n+++ b/src/new.go\n@@ -0,0 +1 @@\n+new file\n"},
		{"to the current state", []string{"--checkpoint", "two"},
			"diff --git a/src/new.go b/src/new.go\n--- a/src/new.go\n+++ b/src/new.go\n@@ -1 +1 @@\n-new file\n+later\n"},
		{"between the same", []string{"--checkpoint", "two", "--to", "two"}, ""},
		{"--stat", []string{"--checkpoint", "one", "--to", "two", "--stat"},
			" /link       | 2 +-\n /old.txt    | 1 -\n /run.sh     | 0\n /src/a.go   | 1 +\n /src/new.go | 1 +\n /tail.txt   | 2 +-\n" +
				" 6 files changed, 4 insertions(+), 3 deletions(-)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.diffOut(0, tc.args...); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	// --exit-code: 1 when something differs, 0 when nothing does.
	a.diffOut(1, "--checkpoint", "two", "--exit-code")
	a.diffOut(0, "--checkpoint", "two", "--to", "two", "--exit-code")
	a.diffOut(1, "/src/new.go", "--exit-code")
}

// treeOf lists a host tree: each path with its mode and content (a
// symlink's target).
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = fi.Mode().Perm().String() + " " + string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Binary content, content that is not UTF-8, and content over the text
// limit are said to differ, with their sizes, never printed.
func TestDiffBinary(t *testing.T) {
	a := newAVFS(t)
	a.okIn([]byte("head\x00tail\n"), "write", "/nul.bin")
	a.okIn([]byte("head\x00tail, longer\n"), "write", "/nul.bin")
	a.okIn([]byte("caf\xe9\n"), "write", "/latin1.txt")
	a.okIn([]byte("caf\xe9s\n"), "write", "/latin1.txt")
	big := bytes.Repeat([]byte("a line of text\n"), (diffTextLimit/15)+1)
	a.okIn(big, "write", "/big.txt")
	big[len(big)-2] = 'X'
	a.okIn(big, "write", "/big.txt")
	for _, tc := range []struct{ path, want string }{
		{"/nul.bin", "diff --git a/nul.bin b/nul.bin\nBinary files a/nul.bin and b/nul.bin differ (10 B -> 18 B)\n"},
		{"/latin1.txt", "diff --git a/latin1.txt b/latin1.txt\nBinary files a/latin1.txt and b/latin1.txt differ (5 B -> 6 B)\n"},
		{"/big.txt", "diff --git a/big.txt b/big.txt\nFiles a/big.txt and b/big.txt differ (8.0 MiB -> 8.0 MiB; text larger than 8.0 MiB is not compared line by line)\n"},
	} {
		if got := a.diffOut(0, tc.path); got != tc.want {
			t.Errorf("%s: got\n%q\nwant\n%q", tc.path, got, tc.want)
		}
	}
	var doc wire.DiffResult
	a.into(&doc, "diff", "/big.txt")
	if len(doc.Files) != 1 || !doc.Files[0].TooLarge || doc.Files[0].Binary || len(doc.Files[0].Hunks) != 0 {
		t.Errorf("--json of a file over the limit: %+v", doc.Files)
	}
	a.into(&doc, "diff", "/nul.bin")
	if len(doc.Files) != 1 || !doc.Files[0].Binary || len(doc.Files[0].Hunks) != 0 {
		t.Errorf("--json of a binary file: %+v", doc.Files)
	}
}

// --json: the document, as wire.DiffResult, and --stat --json without hunks.
func TestDiffJSON(t *testing.T) {
	a := newAVFS(t)
	a.write("first\nsecond", "/notes.txt")
	a.write("first\nsecond!\n", "/notes.txt")
	m := func(n wire.FileMode) *wire.FileMode { return &n }
	n := func(n int64) *int64 { return &n }
	want := wire.DiffResult{Kind: wire.DiffResultKind, Vault: "default", Path: "/notes.txt",
		From: wire.DiffSide{State: wire.DiffStateVersion, Version: 1}, To: wire.DiffSide{State: wire.DiffStateVersion, Version: 2}, Context: 3,
		Files: []wire.DiffFile{{Path: "/notes.txt", Status: wire.DiffModified, Kind: "file", OldMode: m(0o644), NewMode: m(0o644),
			OldSize: n(12), NewSize: n(14), Insertions: 1, Deletions: 1,
			Hunks: []wire.DiffHunk{{OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 2, Lines: []wire.DiffLine{
				{Op: wire.DiffContext, Text: "first"}, {Op: wire.DiffDelete, Text: "second", NoNewline: true}, {Op: wire.DiffInsert, Text: "second!"}}}}}},
		Stat: wire.DiffStat{Files: 1, Insertions: 1, Deletions: 1}}
	var got wire.DiffResult
	a.into(&got, "diff", "/notes.txt")
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("got  %s\nwant %s", g, w)
	}
	a.into(&got, "diff", "/notes.txt", "--stat")
	want.Files[0].Hunks = []wire.DiffHunk{}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Errorf("--stat: got %s", g)
	}
	a.into(&got, "diff", "/notes.txt", "--from", "2")
	if len(got.Files) != 0 || got.Files == nil || got.Stat != (wire.DiffStat{}) {
		t.Errorf("no difference: %+v", got)
	}
	// --exit-code with --json: the document, then exit 1.
	r := a.json(nil, "diff", "/notes.txt", "--exit-code")
	if r.code != 1 || r.doc["kind"] != wire.DiffResultKind {
		t.Errorf("--exit-code --json: exit %d, %s", r.code, r.stdout)
	}
}

// The hunks are GNU diff -u's (when diff is on PATH), for texts whose
// shortest edit script is one.
func TestDiffAgainstGNUDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff on PATH")
	}
	a := newAVFS(t)
	dir := t.TempDir()
	for i, tc := range []struct{ old, new string }{
		{"package main\n\nfunc main() {\n\tprintln(1)\n}\n", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(1)\n}\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n", "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\nFOURTEEN\n15\n"},
		{"a\nb\nc", "a\nb\nc\nd\n"},
	} {
		p := "/f" + string(rune('0'+i))
		a.write(tc.old, p)
		a.write(tc.new, p)
		name := strings.TrimPrefix(p, "/")
		if err := os.WriteFile(filepath.Join(dir, "old"), []byte(tc.old), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "new"), []byte(tc.new), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("diff", "-u", "--label", "a/"+name, "--label", "b/"+name, filepath.Join(dir, "old"), filepath.Join(dir, "new")).Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("diff: %v", err)
		}
		want := "diff --git a/" + name + " b/" + name + "\n" + string(out)
		if got := a.diffOut(0, p); got != want {
			t.Errorf("%s: got\n%s\ndiff -u says\n%s", p, got, want)
		}
	}
}

func TestDiffName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/a.txt", "a/a.txt"},
		{"/dir/file name", "a/dir/file name"},
		{"/tab\there", `"a/tab\there"`},
		{"/q\"\\", `"a/q\"\\"`},
		{"/esc\x1b[31m", `"a/esc\033[31m"`},
		{"/café", "a/café"},
	} {
		if got := diffName("a/", tc.in); got != tc.want {
			t.Errorf("diffName(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// sameStream compares content over several of its buffers.
func TestSameStream(t *testing.T) {
	ctx := context.Background()
	v, err := vault.Create(ctx, filepath.Join(t.TempDir(), "t.avfs"), "t", vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	base := catRandom(3, 5<<19) // 2.5 MiB
	last := bytes.Clone(base)
	last[len(last)-1]++
	first := bytes.Clone(base)
	first[0]++
	for i, content := range [][]byte{base, base, last, first} {
		p := "/f" + strconv.Itoa(i)
		if _, err := v.WriteFile(ctx, p, bytes.NewReader(content), vault.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"/f0", "/f1", true}, {"/f0", "/f2", false}, {"/f0", "/f3", false}} {
		ra, err := v.OpenFile(ctx, tc.a)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := v.OpenFile(ctx, tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sameStream(ra, rb); err != nil || got != tc.want {
			t.Errorf("sameStream(%s, %s) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
		}
		ra.Close()
		rb.Close()
	}
}
