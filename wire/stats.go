package wire

// VaultStatsKind is the kind of `avfs stats --json`.
const VaultStatsKind = "vault_stats"

// VaultStats is what a vault holds and what it costs on disk: `avfs
// stats`. Logical bytes are file sizes; stored bytes are chunk data, each
// distinct chunk once (content is deduplicated by hash).
type VaultStats struct {
	Kind  string `json:"kind"` // VaultStatsKind
	Vault string `json:"vault"`
	// Live is the current state.
	Live VaultStatsLive `json:"live"`
	// Storage is what the vault file keeps for the live state, its history
	// and its checkpoints.
	Storage VaultStatsStorage `json:"storage"`
	// History is what is kept besides the current state.
	History VaultStatsHistory `json:"history"`
}

// VaultStatsLive counts the entries of the current state.
type VaultStatsLive struct {
	Files    int64 `json:"files"`    // regular files
	Dirs     int64 `json:"dirs"`     // directories, the root included
	Symlinks int64 `json:"symlinks"` // symbolic links
	Other    int64 `json:"other"`    // fifos, sockets, device nodes
	Bytes    int64 `json:"bytes"`    // logical bytes of the regular files
	// UniqueBytes is the size of the distinct chunks the live files use:
	// Bytes over UniqueBytes is what deduplication saves.
	UniqueBytes int64 `json:"unique_bytes"`
}

// VaultStatsStorage is the vault file's content and size.
type VaultStatsStorage struct {
	Chunks       int64 `json:"chunks"`       // distinct chunks stored
	ChunkBytes   int64 `json:"chunk_bytes"`  // their size
	Rows         int64 `json:"rows"`         // inode and directory-entry rows, of every generation kept
	LiveRows     int64 `json:"live_rows"`    // those of the current state
	FileSize     int64 `json:"file_size"`    // the vault file and its WAL on disk
	FreeBytes    int64 `json:"free_bytes"`   // pages of the file that hold nothing (reused before the file grows)
	Unreferenced int64 `json:"unreferenced"` // chunks nothing refers to any more (gc removes them)
}

// VaultStatsHistory is what the vault keeps of the past.
type VaultStatsHistory struct {
	Versions    int64 `json:"versions"`    // file versions recorded (avfs log)
	Checkpoints int64 `json:"checkpoints"` // checkpoints
	Marks       int64 `json:"marks"`       // generations pinned by runs under way
	Forks       int64 `json:"forks"`       // live forks borrowing from the vault
	AuditRows   int64 `json:"audit_rows"`  // audit log entries
	// OnlyBytes is the size of the chunks only the past refers to: what
	// history, checkpoints and forks cost beyond the current state.
	OnlyBytes int64 `json:"only_bytes"`
}
