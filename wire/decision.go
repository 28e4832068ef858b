package wire

// Decision is what the policy says about a command. The four values form a
// lattice ordered deny > require_approval > allow_with_checkpoint > allow:
// combining decisions keeps the highest.
type Decision string

// The four decisions.
const (
	Allow               Decision = "allow"                 // run it
	AllowWithCheckpoint Decision = "allow_with_checkpoint" // checkpoint the vault, then run it
	RequireApproval     Decision = "require_approval"      // run it only once a person approved
	Deny                Decision = "deny"                  // never run it
)

// Decisions lists the decisions from the lowest to the highest.
var Decisions = []Decision{Allow, AllowWithCheckpoint, RequireApproval, Deny}

// Rank is the position of d in the lattice (0 for allow … 3 for deny), or
// -1 when d is not one of the four decisions.
func (d Decision) Rank() int {
	switch d {
	case Allow:
		return 0
	case AllowWithCheckpoint:
		return 1
	case RequireApproval:
		return 2
	case Deny:
		return 3
	}
	return -1
}

// Valid reports whether d is one of the four decisions.
func (d Decision) Valid() bool { return d.Rank() >= 0 }

// Join returns the highest of the decisions (the lattice's join). An
// invalid decision counts as Deny: the lattice fails closed. Join of
// nothing is Allow.
func Join(ds ...Decision) Decision {
	out := Allow
	for _, d := range ds {
		if !d.Valid() {
			return Deny
		}
		if d.Rank() > out.Rank() {
			out = d
		}
	}
	return out
}

// Reason explains a decision: the stable id of the rule that gave it (from
// the rule's metadata, e.g. "avfs.deny.privileged"), a message for people,
// and the decision that rule gave.
type Reason struct {
	ID       string   `json:"id"`
	Message  string   `json:"message"`
	Decision Decision `json:"decision"`
}

// BundleInfo identifies a policy bundle that took part in a decision.
type BundleInfo struct {
	Name     string   `json:"name"`     // "default" for the embedded bundle, else the path it was loaded from
	Revision string   `json:"revision"` // the manifest's revision, "" when none
	Roots    []string `json:"roots"`    // the data paths the bundle owns ("" is all of data)
}

// TraceLocation is a place in a Rego file.
type TraceLocation struct {
	File string `json:"file"`
	Row  int    `json:"row"`
	Col  int    `json:"col"`
}

// TraceEvent is one step of a policy evaluation, as `avfs policy eval
// --explain` shows it. It is avfs's own stable form of an OPA trace event;
// compiler temporaries (__local4__) never appear in it.
type TraceEvent struct {
	// Op is the kind of step: "enter", "exit", "eval", "redo", "fail",
	// "note", "duplicate", "index", ….
	Op string `json:"op"`
	// Rule is the path of the rule entered or exited ("data.avfs.decision"),
	// "" for other steps.
	Rule string `json:"rule,omitempty"`
	// Query is the expression or query evaluated, as Rego text.
	Query string `json:"query,omitempty"`
	// Location is where the rule or expression is written.
	Location *TraceLocation `json:"location,omitempty"`
	// Depth is the nesting of the query (1 for the top-level query).
	Depth int `json:"depth"`
	// Message is the text of a trace() note.
	Message string `json:"message,omitempty"`
	// Locals are the policy's own variables bound at this step, as Rego text.
	Locals map[string]string `json:"locals,omitempty"`
}

// PolicyResult is the outcome of evaluating the policy for one input.
type PolicyResult struct {
	Decision Decision     `json:"decision"`
	Reasons  []Reason     `json:"reasons"`
	Bundles  []BundleInfo `json:"bundles"`
	// Sandbox is what the decision lets the sandbox allow (the decision
	// document's optional "sandbox" object); zero grants nothing.
	Sandbox SandboxGrant `json:"sandbox"`
	Trace   []TraceEvent `json:"trace,omitempty"`
	EvalUS  int64        `json:"eval_us"` // time spent evaluating, in microseconds
}
