package wire

import (
	"testing"
	"time"
)

func TestGoldenVaultReplica(t *testing.T) {
	since := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	updated := time.Date(2026, 12, 2, 9, 30, 1, 250_000_000, time.UTC)
	checkGolden(t, "vault_replica", VaultReplica{Kind: VaultReplicaKind, Vault: "work", Replicated: true,
		URL: "s3://backups/avfs/work?endpoint=http%3A%2F%2F127.0.0.1%3A7070", Since: &since,
		Position: &ReplicaPosition{TXID: 1842, UpdatedAt: &updated}})
	checkGolden(t, "vault_replica_stopped", VaultReplica{Kind: VaultReplicaKind, Vault: "work"})
	checkGolden(t, "vault_restore", VaultRestore{Kind: VaultRestoreKind, From: "/mnt/backup/work", Timestamp: &since,
		Position: ReplicaPosition{TXID: 1790, UpdatedAt: &updated},
		Vault: VaultInfo{Name: "work", UUID: "0b6f3e0c-2a47-4d0e-9a51-8f9d1c2e3a4b", Path: "/srv/avfs/vaults/work.avfs", CreatedAt: since,
			Files: 120, Bytes: 532100, FileSize: 1163264, Forks: []VaultForkRef{}, Checkpoints: 3, Generation: 42}})
}
