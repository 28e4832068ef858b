package wire

// DiffResultKind is the kind of `avfs diff --json`.
const DiffResultKind = "diff_result"

// DiffResult is the JSON document of `avfs diff`: how the content of files
// differs between two versions of one file, or between two states of the
// vault (a checkpoint and another, or the current state).
type DiffResult struct {
	Kind    string     `json:"kind"` // DiffResultKind
	Vault   string     `json:"vault"`
	Path    string     `json:"path"` // the file (versions), or the directory or file the diff is limited to ("/": all)
	From    DiffSide   `json:"from"`
	To      DiffSide   `json:"to"`
	Context int        `json:"context"` // unchanged lines around each change (-U)
	Files   []DiffFile `json:"files"`   // the files that differ, by path; never null
	Stat    DiffStat   `json:"stat"`
}

// DiffSide names one of the two states a diff compares.
type DiffSide struct {
	State      DiffState `json:"state"`
	Version    int64     `json:"version,omitempty"`    // state version: the version's number (avfs log)
	Checkpoint string    `json:"checkpoint,omitempty"` // state checkpoint: its id or name, as given
}

// DiffState is what a side of a diff is.
type DiffState string

// The states a diff compares.
const (
	DiffStateVersion    DiffState = "version"    // one version of the file
	DiffStateNone       DiffState = "none"       // no version: the file had none before the one compared
	DiffStateCheckpoint DiffState = "checkpoint" // the vault as a checkpoint saved it
	DiffStateCurrent    DiffState = "current"    // the vault as it is now
)

// DiffFile is one file (or symbolic link, whose content is its target)
// that differs.
type DiffFile struct {
	Path string `json:"path"` // vault-absolute
	// OldPath is the path on the old side when it is another (a version
	// recorded before the file was moved); else it is left out.
	OldPath string     `json:"old_path,omitempty"`
	Status  DiffStatus `json:"status"`
	Kind    string     `json:"kind"`     // file or symlink
	OldMode *FileMode  `json:"old_mode"` // null when added
	NewMode *FileMode  `json:"new_mode"` // null when deleted
	OldSize *int64     `json:"old_size"` // bytes; null when added
	NewSize *int64     `json:"new_size"` // bytes; null when deleted
	// Binary says that a side is not text (a NUL byte in its first 8 KiB,
	// or not UTF-8): the hunks are left out.
	Binary bool `json:"binary"`
	// TooLarge says that a side is larger than the text a diff reads
	// (8 MiB): the hunks are left out.
	TooLarge   bool       `json:"too_large"`
	Insertions int        `json:"insertions"` // lines
	Deletions  int        `json:"deletions"`  // lines
	Hunks      []DiffHunk `json:"hunks"`      // never null; empty when only the mode changed, and with --stat
}

// DiffStatus is how a file differs.
type DiffStatus string

// The statuses of a file in a diff.
const (
	DiffAdded    DiffStatus = "added"    // only on the new side
	DiffDeleted  DiffStatus = "deleted"  // only on the old side
	DiffModified DiffStatus = "modified" // on both sides, with other content or mode
)

// DiffHunk is a run of changed lines with the unchanged lines around them,
// as an @@ header of the unified format gives it: the first line's number
// (from 1) and the count of lines on each side. A side with no lines has
// its start at the line before the hunk (0 at the top).
type DiffHunk struct {
	OldStart int        `json:"old_start"`
	OldLines int        `json:"old_lines"`
	NewStart int        `json:"new_start"`
	NewLines int        `json:"new_lines"`
	Lines    []DiffLine `json:"lines"`
}

// DiffLine is one line of a hunk.
type DiffLine struct {
	Op   DiffOp `json:"op"`
	Text string `json:"text"` // the line without its newline
	// NoNewline marks the last line of a side that has no newline at its
	// end ("\ No newline at end of file").
	NoNewline bool `json:"no_newline,omitempty"`
}

// DiffOp is what a line of a hunk is.
type DiffOp string

// The lines of a hunk.
const (
	DiffContext DiffOp = "context" // unchanged, on both sides
	DiffDelete  DiffOp = "delete"  // only on the old side
	DiffInsert  DiffOp = "insert"  // only on the new side
)

// DiffStat sums a diff up, as git diff --stat does.
type DiffStat struct {
	Files      int `json:"files_changed"`
	Insertions int `json:"insertions"` // lines, in all files
	Deletions  int `json:"deletions"`  // lines, in all files
}
