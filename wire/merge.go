package wire

// MergeResultKind is the kind of `avfs vault merge --json`.
const MergeResultKind = "merge_result"

// MergeResult is the JSON document of `avfs vault merge`: what merging a
// fork back into its parent changed there (or, with --dry-run, would
// change), and the paths both changed since the fork point.
type MergeResult struct {
	Kind string `json:"kind"` // MergeResultKind
	Fork string `json:"fork"` // the vault merged from ("theirs")
	Into string `json:"into"` // the vault merged into, the fork's parent ("ours")
	// ForkGeneration is the parent's generation the fork started from: the
	// merge's base.
	ForkGeneration int64 `json:"fork_generation"`
	DryRun         bool  `json:"dry_run"`
	// Applied says that the changes were committed to Into (false with
	// --dry-run, and when there was nothing to change).
	Applied bool `json:"applied"`
	// Changes are what the merge changes in Into, by path (a path whose
	// kind changes is a deletion then an addition); never null.
	Changes []Change   `json:"changes"`
	Stat    ChangeStat `json:"stat"`
	// Conflicts are the paths both vaults changed, differently, since the
	// fork point, with how each was resolved; never null.
	Conflicts []MergeConflict `json:"conflicts"`
	// Unresolved counts the conflicts no choice resolved. A merge (not a
	// dry run) with any fails with merge_conflict and applies nothing.
	Unresolved int `json:"unresolved"`
}

// ChangeStat counts the changes of a list by op.
type ChangeStat struct {
	Added    int `json:"added"`
	Modified int `json:"modified"`
	Deleted  int `json:"deleted"`
}

// MergeConflict is one path both sides of a merge changed differently.
type MergeConflict struct {
	Path    string            `json:"path"`               // vault-absolute
	PathB64 string            `json:"path_b64,omitempty"` // B64 of Path
	Kind    MergeConflictKind `json:"kind"`
	Ours    string            `json:"ours"`   // what the parent did since the fork point: added, modified or deleted
	Theirs  string            `json:"theirs"` // what the fork did: added, modified or deleted
	// Resolution is the side whose state the path (and everything
	// beneath it) takes.
	Resolution MergeSide `json:"resolution"`
}

// MergeConflictKind says how the two sides of a conflict differ.
type MergeConflictKind string

// The kinds of merge conflicts (ours/theirs: the parent's change first).
const (
	ConflictModifyModify MergeConflictKind = "modify/modify" // both changed the entry (content, mode, target), differently
	ConflictModifyDelete MergeConflictKind = "modify/delete" // the parent changed it (or something beneath it), the fork deleted it
	ConflictDeleteModify MergeConflictKind = "delete/modify" // the parent deleted it, the fork changed it (or something beneath it)
	ConflictAddAdd       MergeConflictKind = "add/add"       // both added an entry there, with different content
	ConflictFileDir      MergeConflictKind = "file/dir"      // a directory on one side, something else on the other
)

// MergeSide is one side of a merge.
type MergeSide string

// The sides a conflict resolves to.
const (
	MergeOurs       MergeSide = "ours"       // the parent's state is kept
	MergeTheirs     MergeSide = "theirs"     // the fork's state is applied
	MergeUnresolved MergeSide = "unresolved" // no choice given: the merge applies nothing
)

// VaultDiffKind is the kind of `avfs vault diff --json`.
const VaultDiffKind = "vault_diff"

// VaultDiff is the JSON document of `avfs vault diff A B`: how the current
// state of vault B differs from that of vault A, by path (content compared
// by hash; times are not compared).
type VaultDiff struct {
	Kind    string     `json:"kind"` // VaultDiffKind
	A       string     `json:"a"`
	B       string     `json:"b"`
	Changes []Change   `json:"changes"` // from A to B, by path; never null
	Stat    ChangeStat `json:"stat"`
}
