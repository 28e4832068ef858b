package wire

import "testing"

func TestGoldenFindResult(t *testing.T) {
	checkGolden(t, "find_result", FindResult{Kind: FindResultKind, Vault: "default", Root: "/src", Total: 2, Matches: []FindMatch{
		{Path: "/src/main.go", Type: "file", Size: 1204, Mode: "0644", Mtime: "2026-11-29T12:04:10Z"},
		{Path: "/src/latest", Type: "symlink", Size: 7, Mode: "0777", Mtime: "2026-11-29T12:04:11Z", Target: "main.go"},
	}})
}
