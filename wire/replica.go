package wire

import "time"

// VaultReplicaKind is the kind of VaultReplica.
const VaultReplicaKind = "vault_replica"

// VaultReplica is what `avfs vault replicate NAME` prints: whether the
// vault is replicated, where to, and how far the replica goes.
type VaultReplica struct {
	Kind  string `json:"kind"` // VaultReplicaKind
	Vault string `json:"vault"`
	// Replicated is whether the vault carries the replica mark: its
	// write-ahead log is the replicator's (docs/replication.md).
	Replicated bool `json:"replicated"`
	// URL is the replica (a directory, or s3://BUCKET/PATH with its
	// endpoint and region parameters; never credentials); "" when not
	// replicated.
	URL string `json:"url"`
	// Since is when replication was turned on; nil when not replicated.
	Since *time.Time `json:"since"`
	// Position is how far the replica goes; nil when not replicated, or
	// --stop.
	Position *ReplicaPosition `json:"position"`
}

// ReplicaPosition is how far a replica goes.
type ReplicaPosition struct {
	// TXID is the replicator's last transaction in the replica (one per
	// shipment of log frames, not per vault commit); 0 when it holds
	// nothing yet.
	TXID uint64 `json:"txid"`
	// UpdatedAt is when that transaction was written; nil when it holds
	// nothing.
	UpdatedAt *time.Time `json:"updated_at"`
}

// VaultRestoreKind is the kind of VaultRestore.
const VaultRestoreKind = "vault_restore"

// VaultRestore is what `avfs vault restore` prints: the vault restored
// and from where.
type VaultRestore struct {
	Kind string `json:"kind"` // VaultRestoreKind
	// From is the replica restored from.
	From string `json:"from"`
	// Timestamp is the point in time asked for; nil: the latest state.
	Timestamp *time.Time `json:"timestamp"`
	// Position is the replica's transaction the vault was restored to.
	Position ReplicaPosition `json:"position"`
	// Vault is the restored vault.
	Vault VaultInfo `json:"vault"`
}
