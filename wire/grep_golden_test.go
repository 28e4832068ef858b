package wire

import "testing"

// TestGoldenGrep pins `avfs grep --json`.
func TestGoldenGrep(t *testing.T) {
	checkGolden(t, "grep_result", GrepResult{Kind: GrepResultKind, Vault: "work", Pattern: "TODO",
		Matches: []GrepMatch{{Path: "/src/a.go", Line: 12, Text: "\t// TODO: retry"}},
		Files:   []GrepFile{{Path: "/src/a.go", Matches: 1}, {Path: "/bin/tool", Matches: 2, Binary: true}}, Total: 3})
}
