package wire

// EffectsInputSchemaVersion is the version of EffectsInput. Fields are
// only ever added, never renamed or removed (docs/input.md, "Effects").
const EffectsInputSchemaVersion = 1

// EffectsInput is the input document of the effects policy
// (data.avfs.effects.decision): what a run did, evaluated after the run
// and before its changes become the vault's. Every array and object is
// present, never null. Documented in docs/input.md ("Effects").
type EffectsInput struct {
	SchemaVersion int `json:"schema_version"`
	// Command is the input document the first decision was made on
	// (command, commands, script, paths, cwd, vault, request, sandbox).
	Command *Input `json:"command"`
	// Decision is the first decision, on the command's text.
	Decision Decision        `json:"decision"`
	Process  EffectsProcess  `json:"process"`
	Changes  []EffectsChange `json:"changes"`
	Totals   EffectsTotals   `json:"totals"`
}

// EffectsProcess is how the command ended.
type EffectsProcess struct {
	ExitCode   int    `json:"exit_code"`
	Signal     string `json:"signal"` // "SIGKILL" when a signal ended it, else ""
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
}

// EffectsChange is one path the run added, modified or deleted, with what
// the effects policy may weigh: sizes, modes, a content hash and, for a
// text file, how many lines changed.
type EffectsChange struct {
	Path       string `json:"path"` // vault-absolute; invalid UTF-8 as U+FFFD
	Op         string `json:"op"`   // added, modified, deleted
	Kind       string `json:"kind"` // file, dir, symlink, fifo, socket, …
	SizeBefore *int64 `json:"size_before"`
	SizeAfter  *int64 `json:"size_after"`
	// ModeBefore and ModeAfter are the permission bits with setuid, setgid
	// and sticky, as octal strings ("0755", "4755"); "" when absent.
	ModeBefore string `json:"mode_before"`
	ModeAfter  string `json:"mode_after"`
	// ContentHash identifies a file's new content: "sha256:" and the hex
	// SHA-256 of its chunk hashes in order (equal content, equal hash);
	// for a symlink, of its target. "" when deleted or not a file or link.
	ContentHash string `json:"content_hash"`
	// LinesAdded and LinesRemoved count the lines a text file gained and
	// lost (a line diff of both sides); null for a binary file, a file
	// larger than EffectsLineDiffLimit on either side, or not a file.
	LinesAdded   *int `json:"lines_added"`
	LinesRemoved *int `json:"lines_removed"`
}

// EffectsLineDiffLimit is the largest side, in bytes, whose lines are
// counted for EffectsChange.LinesAdded and LinesRemoved.
const EffectsLineDiffLimit = 1 << 20

// EffectsTotals sums up the changes.
type EffectsTotals struct {
	Files        int   `json:"files"`         // paths changed (every change, any kind)
	BytesWritten int64 `json:"bytes_written"` // size_after of the files added or modified
	Deleted      int   `json:"deleted"`       // paths deleted
}

// EffectsOutcome is what happened to a run's changes after the effects
// policy decided.
type EffectsOutcome string

// The outcomes.
const (
	EffectsKept   EffectsOutcome = "kept"   // allow: the changes are the vault's
	EffectsUndone EffectsOutcome = "undone" // deny: the vault is back at the run's checkpoint
	EffectsHeld   EffectsOutcome = "held"   // require_approval: kept aside until an approval grants or denies them
)

// EffectsOutcomes lists the outcomes.
var EffectsOutcomes = []EffectsOutcome{EffectsKept, EffectsUndone, EffectsHeld}

// EffectsReport is the effects part of an envelope: the second decision,
// on what the run did, and what became of its changes.
type EffectsReport struct {
	Decision Decision       `json:"decision"`
	Reasons  []Reason       `json:"reasons"`
	Outcome  EffectsOutcome `json:"outcome"`
	// Held is the checkpoint that keeps held changes aside (outcome held);
	// null otherwise. Granting the approval makes it the vault's state.
	Held   *CheckpointRef `json:"held"`
	EvalUS int64          `json:"eval_us"`
}
