package wire

import "testing"

// TestGoldenStats pins `avfs stats --json`.
func TestGoldenStats(t *testing.T) {
	checkGolden(t, "vault_stats", VaultStats{Kind: VaultStatsKind, Vault: "work",
		Live:    VaultStatsLive{Files: 120, Dirs: 14, Symlinks: 2, Other: 1, Bytes: 9 << 20, UniqueBytes: 6 << 20},
		Storage: VaultStatsStorage{Chunks: 180, ChunkBytes: 8 << 20, Rows: 900, LiveRows: 270, FileSize: 10 << 20, FreeBytes: 65536, Unreferenced: 3},
		History: VaultStatsHistory{Versions: 340, Checkpoints: 5, Marks: 0, Forks: 1, AuditRows: 2100, OnlyBytes: 2 << 20}})
}
