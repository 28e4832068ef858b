package wire

import "testing"

func TestGoldenFindResult(t *testing.T) {
	checkGolden(t, "find_result", FindResult{Kind: FindResultKind, Vault: "default", Root: "/src", Total: 4, Matches: []FindMatch{
		{Path: "/src/main.go", Type: "file", Size: 1204, Mode: "0644", Mtime: "2026-11-29T12:04:10Z"},
		{Path: "/src/latest", Type: "symlink", Size: 7, Mode: "0777", Mtime: "2026-11-29T12:04:11Z", Target: "main.go"},
		// Names that are not UTF-8: path_b64 and target_b64 hold the bytes.
		{Path: "/src/\xff\xfe.txt", PathB64: B64("/src/\xff\xfe.txt"), Type: "file", Size: 3, Mode: "0644", Mtime: "2026-11-29T12:04:12Z"},
		{Path: "/src/\xfe\xff", PathB64: B64("/src/\xfe\xff"), Type: "symlink", Size: 6, Mode: "0777", Mtime: "2026-11-29T12:04:13Z",
			Target: "\xff\xfe.txt", TargetB64: B64("\xff\xfe.txt")},
	}})
	root := "/\xff\xfe"
	checkGolden(t, "find_result_raw_root", FindResult{Kind: FindResultKind, Vault: "default", Root: root, RootB64: B64(root), Total: 0, Matches: []FindMatch{}})
}
