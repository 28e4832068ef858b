package linediff

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a\n"}},
		{"a\nb", []string{"a\n", "b"}},
		{"\n\n", []string{"\n", "\n"}},
	} {
		got := Split(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// unified is the output of Unified for a and b with the names a and b.
func unified(t *testing.T, a, b string, context int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Unified(&buf, "a", "b", Split(a), Split(b), context); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestUnified(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    string
		context int
		want    string
	}{
		{name: "identical", a: "x\ny\n", b: "x\ny\n", context: 3, want: ""},
		{name: "both empty", a: "", b: "", context: 3, want: ""},
		{name: "from empty", a: "", b: "x\ny\n", context: 3,
			want: "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{name: "to empty", a: "x\n", b: "", context: 3,
			want: "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n"},
		{name: "one line changed", a: "1\n2\n3\n", b: "1\n2x\n3\n", context: 3,
			want: "--- a\n+++ b\n@@ -1,3 +1,3 @@\n 1\n-2\n+2x\n 3\n"},
		{name: "all changed", a: "a\nb\n", b: "c\nd\ne\n", context: 3,
			want: "--- a\n+++ b\n@@ -1,2 +1,3 @@\n-a\n-b\n+c\n+d\n+e\n"},
		{name: "no newline at the end of the old", a: "x\ny", b: "x\ny\n", context: 3,
			want: "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n"},
		{name: "no newline at the end of the new", a: "x\n", b: "x\nz", context: 3,
			want: "--- a\n+++ b\n@@ -1 +1,2 @@\n x\n+z\n\\ No newline at end of file\n"},
		{name: "no newline at the end of both, unchanged", a: "a\nb\nc", b: "A\nb\nc", context: 3,
			want: "--- a\n+++ b\n@@ -1,3 +1,3 @@\n-a\n+A\n b\n c\n\\ No newline at end of file\n"},
		{name: "context 0", a: "1\n2\n3\n4\n5\n", b: "1\n2\n4\n5\nx\n", context: 0,
			want: "--- a\n+++ b\n@@ -3 +2,0 @@\n-3\n@@ -5,0 +5 @@\n+x\n"},
		{name: "negative context is 0", a: "1\n2\n", b: "1\n3\n", context: -2,
			want: "--- a\n+++ b\n@@ -2 +2 @@\n-2\n+3\n"},
		// Changes 2·context lines apart are one hunk; one line more, two.
		{name: "nearby hunks merge", a: "a\n1\n2\n3\n4\nb\n", b: "A\n1\n2\n3\n4\nB\n", context: 2,
			want: "--- a\n+++ b\n@@ -1,6 +1,6 @@\n-a\n+A\n 1\n 2\n 3\n 4\n-b\n+B\n"},
		{name: "distant hunks stay apart", a: "a\n1\n2\n3\n4\n5\nb\n", b: "A\n1\n2\n3\n4\n5\nB\n", context: 2,
			want: "--- a\n+++ b\n@@ -1,3 +1,3 @@\n-a\n+A\n 1\n 2\n@@ -5,3 +5,3 @@\n 4\n 5\n-b\n+B\n"},
		{name: "context clipped at the ends", a: "1\n2\n3\n4\n5\n6\n7\n8\n", b: "1\n2\n3\n4\nfive\n6\n7\n8\n", context: 3,
			want: "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		// Of the equal scripts, the one that has a run of changes as
		// late as it goes, as diff -u does.
		{name: "a deletion among equal lines goes last", a: "x\na\na\na\ny\n", b: "x\na\na\ny\n", context: 1,
			want: "--- a\n+++ b\n@@ -3,3 +3,2 @@\n a\n-a\n y\n"},
		{name: "an insertion among equal lines goes last", a: "x\na\ny\n", b: "x\na\na\ny\n", context: 1,
			want: "--- a\n+++ b\n@@ -2,2 +2,3 @@\n a\n+a\n y\n"},
		{name: "insert in the middle", a: "a\nb\nc\nd\n", b: "a\nb\nnew\nc\nd\n", context: 1,
			want: "--- a\n+++ b\n@@ -2,2 +2,3 @@\n b\n+new\n c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unified(t, tc.a, tc.b, tc.context); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// apply rebuilds the new text from the old and the hunks.
func apply(t *testing.T, a []string, hs []Hunk) []string {
	t.Helper()
	var out []string
	next := 0 // the next line of a not yet copied
	for _, h := range hs {
		start := h.OldStart - 1
		if h.OldLines == 0 {
			start = h.OldStart
		}
		if start < next {
			t.Fatalf("hunks overlap or go backwards: %+v", h)
		}
		out = append(out, a[next:start]...)
		next = start
		for _, l := range h.Lines {
			switch l.Op {
			case Equal, Delete:
				if next >= len(a) || a[next] != l.Text {
					t.Fatalf("hunk %s: line %d is %q in the old text", h.Header(), next+1, l.Text)
				}
				next++
				if l.Op == Equal {
					out = append(out, l.Text)
				}
			case Insert:
				out = append(out, l.Text)
			}
		}
	}
	return append(out, a[next:]...)
}

// lcs is the length of a longest common subsequence, by dynamic
// programming: what a shortest edit script keeps.
func lcs(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// randomText is n lines drawn from an alphabet of k, the last without a
// newline at times.
func randomText(rng *rand.Rand, n, k int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = string(rune('a'+rng.IntN(k))) + "\n"
	}
	if n > 0 && rng.IntN(4) == 0 {
		lines[n-1] = strings.TrimSuffix(lines[n-1], "\n")
	}
	return lines
}

// The hunks rebuild the new text from the old, and the script is a
// shortest one (the cost bound is far above these sizes).
func TestDiffRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		a := randomText(rng, rng.IntN(30), 1+rng.IntN(6))
		b := randomText(rng, rng.IntN(30), 1+rng.IntN(6))
		if rng.IntN(3) == 0 { // b as an edit of a
			b = append([]string{}, a...)
			for range rng.IntN(4) {
				if len(b) > 0 {
					j := rng.IntN(len(b))
					b = append(b[:j], b[j+1:]...)
				}
				j := rng.IntN(len(b) + 1)
				b = append(b[:j], append([]string{"new\n"}, b[j:]...)...)
			}
		}
		hs := Diff(a, b, rng.IntN(4))
		if got := apply(t, a, hs); strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("a %q b %q: the hunks give %q", a, b, got)
		}
		del, ins := Count(hs)
		if keep := lcs(a, b); del != len(a)-keep || ins != len(b)-keep {
			t.Fatalf("a %q b %q: %d deleted, %d inserted; a shortest script deletes %d, inserts %d", a, b, del, ins, len(a)-keep, len(b)-keep)
		}
	}
}

// Texts too different to compare at the best: the cost bound holds (the
// test would take minutes without it) and the hunks are still right.
func TestDiffCostBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := randomText(rng, 50000, 1000)
	b := randomText(rng, 50000, 1000)
	hs := Diff(a, b, 3)
	if got := apply(t, a, hs); strings.Join(got, "") != strings.Join(b, "") {
		t.Fatal("the hunks do not rebuild the new text")
	}
	// A text edited throughout, each edit a line of its own: the lines in
	// one text only are set aside, so this is quick, and shortest.
	a, b = nil, nil
	for i := range 200000 {
		a = append(a, "line "+strconv.Itoa(i)+"\n")
		if i%7 == 0 {
			b = append(b, "edited "+strconv.Itoa(i)+"\n")
		} else {
			b = append(b, a[i])
		}
	}
	hs = Diff(a, b, 3)
	if del, ins := Count(hs); del != 200000/7+1 || ins != del {
		t.Fatalf("edited throughout: %d deleted, %d inserted", del, ins)
	}
	if got := apply(t, a, hs); strings.Join(got, "") != strings.Join(b, "") {
		t.Fatal("edited throughout: the hunks do not rebuild the new text")
	}
}

// Against GNU diff -u (when diff is on PATH): the same hunks, byte for
// byte, for texts whose shortest script is one; for the others, as many
// lines deleted and inserted.
func TestAgainstGNUDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff on PATH")
	}
	dir := t.TempDir()
	run := func(a, b string, context int) string {
		t.Helper()
		pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if err := os.WriteFile(pa, []byte(a), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pb, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("diff", "-U", strconv.Itoa(context), "--label", "a", "--label", "b", pa, pb)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
			t.Fatalf("diff: %v", err)
		}
		return string(out)
	}
	exact := []struct{ a, b string }{
		{"", "x\n"},
		{"x\n", ""},
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"a\nb\nc", "a\nb\nc\n"},
		{"a\nb\nc\n", "a\nb\nc"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n", "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\nFOURTEEN\n15\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\n5\n6\n7\n8\n9\n"},
		{"package main\n\nfunc main() {\n\tprintln(1)\n}\n", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(1)\n}\n"},
	}
	for _, tc := range exact {
		for _, c := range []int{0, 1, 3} {
			if got, want := unified(t, tc.a, tc.b, c), run(tc.a, tc.b, c); got != want {
				t.Errorf("%q -> %q, -U%d:\ngot\n%s\ndiff -u says\n%s", tc.a, tc.b, c, got, want)
			}
		}
	}
	// Random texts, and random edits of them: as many lines deleted and
	// inserted always (both scripts are shortest), and the same hunks
	// (all of them today; GNU diff also sets aside lines frequent in one
	// text, at times, which could pick another of the shortest scripts).
	rng := rand.New(rand.NewPCG(5, 6))
	identical, n := 0, 200
	for i := 0; i < n; i++ {
		a, b := randomText(rng, rng.IntN(40), 5), randomText(rng, rng.IntN(40), 5)
		if i%2 == 0 {
			b = append([]string{}, a...)
			for range 1 + rng.IntN(3) {
				j := rng.IntN(len(b) + 1)
				if j < len(b) && rng.IntN(2) == 0 {
					b = append(b[:j], b[j+1:]...)
				} else {
					b = append(b[:j], append([]string{string(rune('a'+rng.IntN(5))) + "\n"}, b[j:]...)...)
				}
			}
			b = Split(strings.Join(b, "")) // a line after one without a newline joins it
		}
		want := run(strings.Join(a, ""), strings.Join(b, ""), 3)
		if unified(t, strings.Join(a, ""), strings.Join(b, ""), 3) == want {
			identical++
		}
		var wd, wi int
		for _, l := range strings.Split(want, "\n") {
			switch {
			case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "--- "):
				wd++
			case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ "):
				wi++
			}
		}
		if d, in := Count(Diff(a, b, 3)); d != wd || in != wi {
			t.Fatalf("%q -> %q: %d deleted, %d inserted; diff -u: %d, %d", a, b, d, in, wd, wi)
		}
	}
	if identical < n*95/100 {
		t.Errorf("%d of %d diffs are diff -u's, byte for byte; want 95%% at least", identical, n)
	}
}
