package wire

import "testing"

// TestGoldenDiff pins `avfs diff --json`: versions of one file, and
// checkpoints with every status, a mode change, a binary file and a last
// line without a newline.
func TestGoldenDiff(t *testing.T) {
	m := func(n FileMode) *FileMode { return &n }
	checkGolden(t, "diff_versions", DiffResult{Kind: DiffResultKind, Vault: "work", Path: "/notes.txt",
		From: DiffSide{State: DiffStateVersion, Version: 2}, To: DiffSide{State: DiffStateVersion, Version: 3}, Context: 3,
		Files: []DiffFile{{Path: "/notes.txt", Status: DiffModified, Kind: "file", OldMode: m(0o644), NewMode: m(0o644),
			OldSize: i64(12), NewSize: i64(13), Insertions: 1, Deletions: 1,
			Hunks: []DiffHunk{{OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 2, Lines: []DiffLine{
				{Op: DiffContext, Text: "first"}, {Op: DiffDelete, Text: "second", NoNewline: true}, {Op: DiffInsert, Text: "second!"}}}}}},
		Stat: DiffStat{Files: 1, Insertions: 1, Deletions: 1}})
	checkGolden(t, "diff_checkpoints", DiffResult{Kind: DiffResultKind, Vault: "work", Path: "/",
		From: DiffSide{State: DiffStateCheckpoint, Checkpoint: "before-refactor"}, To: DiffSide{State: DiffStateCurrent}, Context: 3,
		Files: []DiffFile{
			{Path: "/bin/tool", Status: DiffModified, Kind: "file", OldMode: m(0o755), NewMode: m(0o755), OldSize: i64(4096), NewSize: i64(4100),
				Binary: true, Hunks: []DiffHunk{}},
			{Path: "/new.txt", Status: DiffAdded, Kind: "file", NewMode: m(0o644), NewSize: i64(4), Insertions: 1,
				Hunks: []DiffHunk{{OldStart: 0, OldLines: 0, NewStart: 1, NewLines: 1, Lines: []DiffLine{{Op: DiffInsert, Text: "new"}}}}},
			{Path: "/old.txt", Status: DiffDeleted, Kind: "symlink", OldMode: m(0o777), OldSize: i64(7), Deletions: 1,
				Hunks: []DiffHunk{{OldStart: 1, OldLines: 1, NewStart: 0, NewLines: 0, Lines: []DiffLine{{Op: DiffDelete, Text: "new.txt", NoNewline: true}}}}},
			{Path: "/run.sh", Status: DiffModified, Kind: "file", OldMode: m(0o644), NewMode: m(0o755), OldSize: i64(10), NewSize: i64(10), Hunks: []DiffHunk{}},
			{Path: "/data.csv", Status: DiffModified, Kind: "file", OldMode: m(0o644), NewMode: m(0o644), OldSize: i64(20 << 20), NewSize: i64(21 << 20),
				TooLarge: true, Hunks: []DiffHunk{}},
		},
		Stat: DiffStat{Files: 5, Insertions: 1, Deletions: 1}})
}
