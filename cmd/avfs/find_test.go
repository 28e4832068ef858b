package main

import (
	"strings"
	"testing"
	"time"
)

// find filters a vault's entries by name, path, type, size and mtime
// without mounting it; --json gives the find_result document.
func TestFind(t *testing.T) {
	a := newAVFS(t)
	a.ok("mkdir", "/src")
	a.ok("mkdir", "/src/sub")
	a.write(strings.Repeat("x", 5000), "/src/big.go")
	a.write("small", "/src/sub/small.go")
	a.write("notes", "/src/notes.txt")
	a.ok("ln", "-s", "big.go", "/src/link")
	time.Sleep(10 * time.Millisecond) // -newer compares modification times
	a.write("later", "/later.txt")

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"/src", "-name", "*.go"}, []string{"/src/big.go", "/src/sub/small.go"}},
		{[]string{"-path", "/src/*.go"}, []string{"/src/big.go", "/src/sub/small.go"}},
		{[]string{"-path", "/src/s?b"}, []string{"/src/sub"}},
		{[]string{"-type", "d"}, []string{"/", "/src", "/src/sub"}},
		{[]string{"-type", "l"}, []string{"/src/link"}},
		{[]string{"-type", "f", "-size", "+4k"}, []string{"/src/big.go"}},
		{[]string{"-type", "f", "-size", "-5c"}, []string{}},
		{[]string{"-type", "f", "-size", "5"}, []string{"/later.txt", "/src/notes.txt", "/src/sub/small.go"}},
		{[]string{"-type", "f", "-mtime", "-1", "-name", "*.txt"}, []string{"/later.txt", "/src/notes.txt"}},
		{[]string{"-type", "f", "-mtime", "+0"}, []string{}},
		{[]string{"-newer", "/src/link"}, []string{"/", "/later.txt"}},
	} {
		var res struct {
			Kind    string `json:"kind"`
			Matches []struct {
				Path string `json:"path"`
				Mode string `json:"mode"`
			} `json:"matches"`
			Total int `json:"total"`
		}
		a.into(&res, append([]string{"find"}, tc.args...)...)
		got := []string{}
		for _, m := range res.Matches {
			got = append(got, m.Path)
		}
		equalSlice(t, strings.Join(tc.args, " "), got, tc.want)
		equal(t, "total", res.Total, len(tc.want))
		equal(t, "kind", res.Kind, "find_result")
		// Text output prints the same paths, one a line.
		r := a.exec(nil, append([]string{"find"}, tc.args...)...)
		equalSlice(t, "text "+strings.Join(tc.args, " "), strings.Fields(string(r.stdout)), tc.want)
	}
	for _, bad := range [][]string{{"-type", "x"}, {"-size", "10q"}, {"-size", "+"}, {"-mtime", "x"}, {"-name", "["}, {"-path", "[a"}} {
		a.fail(2, "usage", append([]string{"find"}, bad...)...)
	}
	a.fail(1, "not_found", "find", "-newer", "/nope")
}
