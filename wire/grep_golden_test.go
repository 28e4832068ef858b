package wire

import "testing"

// TestGoldenGrep pins `avfs grep --json`.
func TestGoldenGrep(t *testing.T) {
	checkGolden(t, "grep_result", GrepResult{Kind: GrepResultKind, Vault: "work", Pattern: "TODO",
		Matches: []GrepMatch{{Path: "/src/a.go", Line: 12, Text: "\t// TODO: retry"}, {Path: "/src/\xff\xfe.txt", PathB64: B64("/src/\xff\xfe.txt"), Line: 1, Text: "TODO"}},
		Files: []GrepFile{{Path: "/src/a.go", Matches: 1}, {Path: "/src/\xff\xfe.txt", PathB64: B64("/src/\xff\xfe.txt"), Matches: 1},
			{Path: "/bin/tool", Matches: 2, Binary: true}}, Total: 4})
}
