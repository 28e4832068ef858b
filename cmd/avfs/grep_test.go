package main

import (
	"strings"
	"testing"

	"avfs/wire"
)

// grep searches file content without mounting, as grep(1) prints it,
// with find's filters; exit 1 when nothing matched.
func TestGrep(t *testing.T) {
	a := newAVFS(t)
	a.ok("mkdir", "/src")
	a.write("package a\n// TODO: retry\nfunc A() {}\n", "/src/a.go")
	a.write("todo list\nnothing\n", "/notes.txt")
	a.write("bin\x00ary TODO\n", "/blob")
	a.write(strings.Repeat("TODO\n", 5), "/src/many.go")
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"regexp in a dir", []string{"TODO", "/src"}, "/src/a.go:// TODO: retry\n/src/many.go:TODO\n/src/many.go:TODO\n/src/many.go:TODO\n/src/many.go:TODO\n/src/many.go:TODO\n", 0},
		{"one file, numbers", []string{"-n", "func", "/src/a.go"}, "3:func A() {}\n", 0},
		{"ignore case, files only", []string{"-i", "-l", "todo"}, "/blob\n/notes.txt\n/src/a.go\n/src/many.go\n", 0},
		{"binary", []string{"ary"}, "Binary file /blob matches\n", 0},
		{"count with a filter", []string{"-c", "-name", "*.go", "TODO"}, "/src/a.go:1\n/src/many.go:5\n", 0},
		{"max per file", []string{"-m", "2", "TODO", "/src/many.go"}, "TODO\nTODO\n", 0},
		{"fixed string", []string{"-F", "A()", "/src"}, "/src/a.go:func A() {}\n", 0},
		{"whole words", []string{"-w", "-i", "todo", "/notes.txt"}, "todo list\n", 0},
		{"invert", []string{"-v", "todo", "/notes.txt"}, "nothing\n", 0},
		{"no match", []string{"absent"}, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.exec(nil, append([]string{"grep"}, tc.args...)...)
			if r.code != tc.code || string(r.stdout) != tc.want {
				t.Fatalf("exit %d, stdout %q (stderr %q); want %d, %q", r.code, r.stdout, r.stderr, tc.code, tc.want)
			}
		})
	}
	var res wire.GrepResult
	a.into(&res, "grep", "-n", "TODO", "/src/a.go", "/blob")
	if res.Kind != wire.GrepResultKind || res.Total != 2 || len(res.Matches) != 1 || res.Matches[0] != (wire.GrepMatch{Path: "/src/a.go", Line: 2, Text: "// TODO: retry"}) ||
		len(res.Files) != 2 || !res.Files[1].Binary {
		t.Fatalf("json %+v", res)
	}
	if r := a.exec(nil, "grep", "("); r.code != 2 {
		t.Fatalf("bad pattern: exit %d %q", r.code, r.stderr)
	}
}
