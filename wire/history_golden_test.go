package wire

import (
	"testing"
	"time"
)

func TestGoldenGCResult(t *testing.T) {
	checkGolden(t, "gc_result", GCResult{Vault: "work", GCCounts: GCCounts{Versions: 1830, Rows: 412, Chunks: 37, BytesFreed: 2424832,
		FileBefore: 9437184, FileAfter: 6868992, ForksReleased: 1, FilesRemoved: 1}})
	checkGolden(t, "gc_dry_run", GCResult{Vault: "work", GCCounts: GCCounts{DryRun: true, Versions: 1830, Rows: 412, Chunks: 37, BytesFreed: 2424832,
		FileBefore: 9437184, FileAfter: 9437184, ForksReleased: 1, FilesRemoved: 1}})
}

func TestGoldenPruneResult(t *testing.T) {
	at := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	checkGolden(t, "prune_dry_run", PruneResult{Vault: "work", Keep: 5, OlderThan: "7d", DryRun: true, Removed: 3, Bytes: 5303,
		Versions: []PrunedVersion{
			{Path: "/notes.txt", Version: 1, Op: "create", Time: at, Size: 1200},
			{Path: "/src/main.go", Version: 3, Op: "write", Time: at.Add(2 * time.Hour), Size: 4100},
			{Path: "/\xff\xfe.txt", PathB64: B64("/\xff\xfe.txt"), Version: 1, Op: "create", Time: at, Size: 3},
		}})
	checkGolden(t, "prune_result", PruneResult{Vault: "work", Keep: 1, Removed: 0, Versions: []PrunedVersion{}})
}

func TestGoldenRetention(t *testing.T) {
	checkGolden(t, "retention", RetentionResult{Vault: "work", Retention: VaultRetention{Versions: 32, MaxAgeS: 2592000, HistoryPct: 50, HistoryMinMB: 16},
		Decisions: DecisionRetention{Max: 10000, MaxAgeS: 2592000, Recorded: 412},
		LiveBytes: 31457280, StoredBytes: 48234496, BudgetBytes: 16777216, Versions: 2210})
	checkGolden(t, "retention_off", RetentionResult{Vault: "audit-trail", Retention: VaultRetention{}, LiveBytes: 4096, StoredBytes: 1048576, Versions: 310})
}
