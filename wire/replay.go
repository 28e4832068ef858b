package wire

import "time"

// DecisionSource says which way into avfs a recorded decision came.
type DecisionSource string

// The sources of decisions.
const (
	SourceExec     DecisionSource = "exec"     // avfs proxy exec (and runner.Exec without a source)
	SourceHook     DecisionSource = "hook"     // an agent harness's hook (avfs hook …, a precheck for it)
	SourceMCP      DecisionSource = "mcp"      // the exec tool of avfs mcp
	SourceServe    DecisionSource = "serve"    // POST /v1/exec or /v1/precheck of avfs serve
	SourcePrecheck DecisionSource = "precheck" // runner.Precheck without a source
	SourceDecide   DecisionSource = "decide"   // POST /v1/decide of avfs serve: a dry run, in decision logs only (no vault records it)
)

// DecisionRecord is one decision avfs made, as a vault records it (see
// vault.RecordDecision) and as `avfs policy replay --corpus` reads it, one
// a line. Input is the document the policy saw; Reasons the ids of the
// reasons it gave, highest decision first; Bundles the bundles (and their
// revisions) that decided.
type DecisionRecord struct {
	DecisionID string         `json:"decision_id"` // random, unique: also the envelope's decision_id
	Time       time.Time      `json:"time"`
	Source     DecisionSource `json:"source"`
	Vault      string         `json:"vault"`   // the vault decided about
	Command    string         `json:"command"` // the command as asked: the shell script, or the argv quoted as a shell word list
	Decision   Decision       `json:"decision"`
	Reasons    []string       `json:"reasons"`
	Bundles    []BundleInfo   `json:"bundles"`
	Input      *Input         `json:"input"`
}

// ReplayBaseline is what `avfs policy replay` compares the new policy's
// decisions with.
type ReplayBaseline string

// The baselines of a replay.
const (
	// BaselineRecorded compares with the decision recorded at the time
	// (under whatever bundles decided then: see DecisionRecord.Bundles).
	BaselineRecorded ReplayBaseline = "recorded"
	// BaselineCurrent compares with what the current policy (the config's
	// bundles, without --bundle) decides for the same input now: the
	// difference the bundle change alone makes.
	BaselineCurrent ReplayBaseline = "current"
)

// ReplayFailOn says which changes make `avfs policy replay` exit 2.
type ReplayFailOn string

// The --fail-on settings.
const (
	FailOnLooser ReplayFailOn = "looser" // a decision lower in the lattice than before (deny → allow …)
	FailOnAny    ReplayFailOn = "any"    // any change of decision, looser or stricter
	FailOnNone   ReplayFailOn = "none"   // never: report only
)

// ReplayChangeKind classifies a change by the lattice of Decision
// (allow < allow_with_checkpoint < require_approval < deny).
type ReplayChangeKind string

// The kinds of change.
const (
	ChangeLooser   ReplayChangeKind = "looser"   // the new decision is lower: more is run, or with less
	ChangeStricter ReplayChangeKind = "stricter" // the new decision is higher
	ChangeReasons  ReplayChangeKind = "reasons"  // the same decision for other rules (the set of reason ids differs)
)

// ReplayKind is the kind field of ReplayResult.
const ReplayKind = "policy_replay"

// ReplayResult is the JSON document of `avfs policy replay --json`.
type ReplayResult struct {
	Kind    string         `json:"kind"`
	Against ReplayBaseline `json:"against"`
	FailOn  ReplayFailOn   `json:"fail_on"`
	// Since is the --since cut-off: decisions recorded before it were
	// not replayed; null for all.
	Since *time.Time `json:"since"`
	// Bundles are those of the new policy; BaselineBundles those of the
	// current one, when it decided some baselines (else empty).
	Bundles         []BundleInfo `json:"bundles"`
	BaselineBundles []BundleInfo `json:"baseline_bundles"`
	// Sources are the vaults or the corpus file replayed.
	Sources  []string `json:"sources"`
	Replayed int      `json:"replayed"` // decisions re-evaluated
	// Changes are the decisions that would change, in the order
	// replayed (each vault's oldest first, or the corpus's lines).
	Changes []ReplayChange `json:"changes"`
	// Totals count the changes by class (from, to), the classes in
	// the order of the lattice: from the highest from, then the
	// lowest to.
	Totals   []ReplayTotal `json:"totals"`
	Looser   int           `json:"looser"`
	Stricter int           `json:"stricter"`
	Reasons  int           `json:"reasons"` // same decision, other reason ids
	// Failed says whether a change is one FailOn fails on: the command
	// then exits 2.
	Failed bool `json:"failed"`
}

// ReplayChange is one decision the new policy makes otherwise.
type ReplayChange struct {
	DecisionID string `json:"decision_id"` // "" for a corpus line without one
	// Vault is the vault that recorded it ("" from a corpus line
	// without one); Line the corpus line (0 from a vault).
	Vault  string         `json:"vault"`
	Line   int            `json:"line,omitempty"`
	Time   *time.Time     `json:"time"` // null when not known
	Source DecisionSource `json:"source"`
	// Command is the command as asked (DecisionRecord.Command, or the
	// input's script or command when the record has none).
	Command     string           `json:"command"`
	From        Decision         `json:"from"` // the baseline's decision
	To          Decision         `json:"to"`   // the new policy's
	Kind        ReplayChangeKind `json:"kind"`
	ReasonsFrom []string         `json:"reasons_from"`
	ReasonsTo   []string         `json:"reasons_to"`
	// Recorded is the decision recorded at the time, with the revisions
	// of its bundles ("" and empty for a bare input of a corpus).
	Recorded        Decision     `json:"recorded"`
	RecordedBundles []BundleInfo `json:"recorded_bundles"`
}

// ReplayTotal counts the changes of one class.
type ReplayTotal struct {
	From  Decision         `json:"from"`
	To    Decision         `json:"to"`
	Kind  ReplayChangeKind `json:"kind"`
	Count int              `json:"count"`
}
