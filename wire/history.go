package wire

import "time"

// GCResult is the JSON document of `avfs gc` (and `avfs vault gc`): what
// gc freed or, with --dry-run, what it would free now.
type GCResult struct {
	Vault string `json:"vault"`
	GCCounts
}

// GCCounts says what gc removed, or with DryRun what it would remove
// (vault.GCResult is this type).
type GCCounts struct {
	// DryRun says that nothing was changed: the counts are what gc would
	// free now, and FileAfter is FileBefore.
	DryRun bool `json:"dry_run"`
	// Versions counts the file versions the vault's retention settings
	// removed first (see VaultRetention).
	Versions   int64 `json:"versions_removed"`
	Rows       int64 `json:"rows_removed"`     // inode and directory-entry rows no checkpoint, fork or mark needs
	Chunks     int64 `json:"chunks_removed"`   // chunks nothing kept refers to
	BytesFreed int64 `json:"bytes_freed"`      // their stored bytes
	FileBefore int64 `json:"file_size_before"` // bytes of the vault file and its WAL
	FileAfter  int64 `json:"file_size_after"`  // after the vacuum
	// ForksReleased counts the pins of forks that never completed (killed
	// while being made) released first, FilesRemoved the temporary files
	// of ended forks removed from the vaults directory.
	ForksReleased int64 `json:"forks_released"`
	FilesRemoved  int64 `json:"fork_files_removed"`
	// MarksReleased counts the marks that killed runs left, dropped first
	// with their pins of checkpoints (none while a run is under way).
	MarksReleased int64 `json:"marks_released"`
}

// PruneResult is the JSON document of `avfs prune`: the file versions
// removed or, with --dry-run, those that would be.
type PruneResult struct {
	Vault     string `json:"vault"`
	Keep      int64  `json:"keep"`                 // --keep; 0 when not given (the newest version is always kept)
	OlderThan string `json:"older_than,omitempty"` // --older-than as given, when given
	DryRun    bool   `json:"dry_run"`
	// Removed counts the versions removed (with DryRun: that would be),
	// Bytes the sum of their sizes (the data gc may then free, at most).
	Removed int64 `json:"versions_removed"`
	Bytes   int64 `json:"bytes"`
	// Versions lists them, by file (inode) then version; never null.
	Versions []PrunedVersion `json:"versions"`
}

// PrunedVersion is one file version prune removes.
type PrunedVersion struct {
	Path    string    `json:"path"`               // the file's path when the version was recorded
	PathB64 string    `json:"path_b64,omitempty"` // B64 of Path
	Version int64     `json:"version"`
	Op      string    `json:"op"`
	Time    time.Time `json:"time"`
	Size    int64     `json:"size"`
}
