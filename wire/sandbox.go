package wire

// SandboxMode says what holds the command in: the kernel, or nothing but
// the policy.
type SandboxMode string

// The sandbox modes a run can have (input.sandbox.mode, envelope
// sandbox.mode).
const (
	SandboxNamespaces SandboxMode = "namespaces" // Linux namespaces (and Landlock where the kernel has it): the view is all the command can reach
	SandboxNone       SandboxMode = "none"       // no sandbox: the command runs with avfs's own authority over the host
)

// Valid reports whether m is one of the modes.
func (m SandboxMode) Valid() bool { return m == SandboxNamespaces || m == SandboxNone }

// Network is what network a sandboxed command reaches.
type Network string

// The network grants (decision sandbox.network, envelope sandbox.network).
const (
	NetworkNone Network = "none" // a network namespace of its own with loopback only
	NetworkHost Network = "host" // the host's network
)

// Valid reports whether n is one of the grants.
func (n Network) Valid() bool { return n == NetworkNone || n == NetworkHost }

// SandboxGrant is what a decision lets the sandbox allow beyond the
// default view: the optional "sandbox" object of data.avfs.decision. A
// zero value grants nothing.
type SandboxGrant struct {
	// Network is "host" to give the command the host's network; "" or
	// "none" keeps it on a loopback of its own.
	Network Network `json:"network,omitempty"`
	// Preview, on a require_approval decision, runs the command first in
	// a throwaway fork with the network off and asks approval for its
	// result (proxy exec --preview does the same for any such run).
	Preview bool `json:"preview,omitempty"`
}

// Where says what a path names in the command's view.
type Where string

// The kinds of path (input.paths[].where).
const (
	WhereVault          Where = "vault"            // inside the vault (the workspace)
	WhereScratch        Where = "scratch"          // the sandbox's private /tmp or home: discarded after the run, never the host
	WhereReadOnlySystem Where = "read_only_system" // a system path the sandbox shows read-only
	WhereOutside        Where = "outside"          // anything else: not in the sandbox's view, or the host itself without a sandbox
	WhereUnknown        Where = "unknown"          // only known when the command runs ($DIR/x)
)

// Valid reports whether w is one of the kinds.
func (w Where) Valid() bool {
	switch w {
	case WhereVault, WhereScratch, WhereReadOnlySystem, WhereOutside, WhereUnknown:
		return true
	}
	return false
}

// SandboxInput is input.sandbox: how the command will be held, so that a
// policy can tighten where the kernel is not holding the line.
type SandboxInput struct {
	Mode SandboxMode `json:"mode"`
	// Reason says why Mode is "none" ("--sandbox none", or what the
	// kernel refused); "" otherwise.
	Reason string `json:"reason"`
	// Workspace is where the command sees the vault: "/workspace" in a
	// sandbox, the host directory of the mount without one.
	Workspace string `json:"workspace"`
	// Home is the command's HOME: a private home in a sandbox.
	Home string `json:"home"`
	// ReadOnlySystem lists the directories a sandbox shows read-only
	// (/usr, /etc, …); empty without a sandbox.
	ReadOnlySystem []string `json:"read_only_system"`
	// Scratch lists the directories private to a sandbox (/tmp, its home,
	// /dev, /proc): nothing there is the host's, and what is written there
	// is gone after the run; empty without a sandbox.
	Scratch []string `json:"scratch"`
}

// SandboxReport is the envelope's sandbox: how the command was held.
type SandboxReport struct {
	Mode      SandboxMode `json:"mode"`
	Reason    string      `json:"reason,omitempty"` // why "none"
	Workspace string      `json:"workspace"`        // where the command saw the vault
	Home      string      `json:"home"`             // the command's HOME
	Network   Network     `json:"network"`          // "none" or "host"; "host" without a sandbox
	// Landlock is the Landlock ABI version the sandbox restricted the
	// command with; 0 when the kernel has none (or without a sandbox).
	Landlock int `json:"landlock"`
}
