package wire

import "testing"

func TestGoldenMerge(t *testing.T) {
	changes := []Change{
		{Path: "/src/main.go", Op: "modified", Kind: "file", SizeBefore: i64(1200), SizeAfter: i64(1342), ModeBefore: "0644", ModeAfter: "0644"},
		{Path: "/src/old.go", Op: "deleted", Kind: "file", SizeBefore: i64(80), ModeBefore: "0644"},
		{Path: "/src/util.go", Op: "added", Kind: "file", SizeAfter: i64(512), ModeAfter: "0644"},
	}
	conflicts := []MergeConflict{
		{Path: "/README.md", Kind: ConflictModifyModify, Ours: "modified", Theirs: "modified", Resolution: MergeTheirs},
		{Path: "/docs", Kind: ConflictModifyDelete, Ours: "modified", Theirs: "deleted", Resolution: MergeOurs},
	}
	checkGolden(t, "merge_result", MergeResult{Kind: MergeResultKind, Fork: "attempt-2", Into: "work", ForkGeneration: 41, Applied: true,
		Changes: changes, Stat: ChangeStat{Added: 1, Modified: 1, Deleted: 1}, Conflicts: conflicts})
	checkGolden(t, "merge_result_dry_run", MergeResult{Kind: MergeResultKind, Fork: "attempt-3", Into: "work", ForkGeneration: 41, DryRun: true,
		Changes: changes[:1], Stat: ChangeStat{Modified: 1},
		Conflicts:  []MergeConflict{{Path: "/src/x\ufffd.go", PathB64: "L3NyYy94/y5nbw==", Kind: ConflictAddAdd, Ours: "added", Theirs: "added", Resolution: MergeUnresolved}},
		Unresolved: 1})
	checkGolden(t, "vault_diff", VaultDiff{Kind: VaultDiffKind, A: "work", B: "attempt-2", Changes: changes, Stat: ChangeStat{Added: 1, Modified: 1, Deleted: 1}})
}
