package wire

import (
	"testing"
	"time"
)

func TestGoldenVaultList(t *testing.T) {
	created := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	forked := time.Date(2026, 11, 30, 8, 15, 0, 0, time.UTC)
	work := VaultInfo{Name: "work", UUID: "0b6f3e0c-2a47-4d0e-9a51-8f9d1c2e3a4b", Path: "/home/alice/.avfs/vaults/work.avfs", CreatedAt: created,
		Files: 120, Bytes: 532100, FileSize: 1163264, Quota: VaultQuota{MaxSizeMB: 1024}, Forks: []VaultForkRef{
			{Name: "experiment", UUID: "5c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e", CreatedAt: forked}},
		Checkpoints: 3, Generation: 42}
	experiment := VaultInfo{Name: "experiment", UUID: "5c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e", Path: "/home/alice/.avfs/vaults/experiment.avfs",
		CreatedAt: forked, Files: 120, Bytes: 532100, FileSize: 98304, Forks: []VaultForkRef{},
		Parent: &VaultForkPoint{Name: "work", UUID: work.UUID, Generation: 40, ForkedAt: forked}, Generation: 2}
	broken := VaultListEntry{VaultInfo: VaultInfo{Name: "broken", Path: "/home/alice/.avfs/vaults/broken.avfs"},
		Error: &ErrorBody{Code: CodeVaultUnreadable, Message: `open vault "broken": /home/alice/.avfs/vaults/broken.avfs is not an SQLite database`,
			Details: map[string]any{"vault": "broken", "path": "/home/alice/.avfs/vaults/broken.avfs", "reason": VaultNotSQLite}}}
	newer := VaultListEntry{VaultInfo: VaultInfo{Name: "next", Path: "/home/alice/.avfs/vaults/next.avfs"},
		Error: &ErrorBody{Code: CodeVaultUnreadable,
			Message: `open vault "next": /home/alice/.avfs/vaults/next.avfs is a vault of a newer avfs (schema version 2; this avfs reads version 1): use that avfs, or upgrade this one`,
			Details: map[string]any{"vault": "next", "path": "/home/alice/.avfs/vaults/next.avfs", "reason": VaultSchemaTooNew,
				"schema_version": 2, "supported_schema_version": 1}}}
	checkGolden(t, "vault_list", VaultList{Kind: VaultListKind, Current: "work", Vaults: []VaultListEntry{
		broken, {VaultInfo: experiment}, newer, {VaultInfo: work}}})
	checkGolden(t, "vault_info", work)
}
