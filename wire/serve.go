package wire

import "time"

// The documents of `avfs serve` (docs/serve.md, docs/serve.openapi.json).
// POST /v1/exec answers an Envelope, byte for byte as `avfs --json proxy
// exec` prints it; POST /v1/decide a DecideResult; errors an ErrorDocument
// with an HTTP status of its code (see HTTPStatus).

// ServeStatusKind is the kind of a ServeStatus document.
const ServeStatusKind = "avfs.serve.status"

// ExecRequest is the body of POST /v1/exec: the options of `avfs proxy
// exec` (also the body of POST /v1/precheck). Durations are milliseconds; an absent one takes proxy exec's
// default, 0 is what 0 is on the command line (timeout_ms 0: never; wait_ms
// 0: fail at once when the vault is busy). Env entries are KEY=VALUE, or KEY
// for the daemon's own variable.
type ExecRequest struct {
	Argv               []string `json:"argv,omitempty"`  // the command; or shell
	Shell              string   `json:"shell,omitempty"` // a script for /bin/sh -c
	Cwd                string   `json:"cwd,omitempty"`   // vault directory ("/" when empty)
	Vault              string   `json:"vault,omitempty"` // vault name ("default" when empty)
	TimeoutMS          *int64   `json:"timeout_ms,omitempty"`
	KillGraceMS        *int64   `json:"kill_grace_ms,omitempty"`
	MaxOutput          int64    `json:"max_output,omitempty"`  // bytes of stdout and of stderr kept (0: 1 MiB)
	MaxChanges         *int     `json:"max_changes,omitempty"` // changes listed (0: all; absent: 1000)
	Env                []string `json:"env,omitempty"`
	Mountpoint         string   `json:"mountpoint,omitempty"`
	MountMode          string   `json:"mount_mode,omitempty"` // auto, fuse or materialize
	ApprovalID         string   `json:"approval_id,omitempty"`
	ApprovalTTLMS      *int64   `json:"approval_ttl_ms,omitempty"`
	RollbackOnFailure  bool     `json:"rollback_on_failure,omitempty"`
	WaitMS             *int64   `json:"wait_ms,omitempty"` // how long to wait for a busy vault (absent: 30 s)
	Explain            string   `json:"explain,omitempty"` // notes, fails or full
	Readonly           bool     `json:"readonly,omitempty"`
	Sandbox            string   `json:"sandbox,omitempty"` // auto, namespaces or none ("": the config's)
	AllowWritableTrust bool     `json:"allow_writable_trust,omitempty"`
	// HostEnv is the client's environment (KEY=VALUE), where the
	// allow-listed variables (PATH, LANG…) and env's KEY entries are looked
	// up; absent, the daemon's. Approver secrets in it are never used.
	HostEnv []string `json:"host_env,omitempty"`
}

// DecideRequest is the body of POST /v1/decide: what `avfs policy eval`
// takes. Nothing runs and nothing is verified.
type DecideRequest struct {
	Argv       []string    `json:"argv,omitempty"`
	Shell      string      `json:"shell,omitempty"`
	Cwd        string      `json:"cwd,omitempty"`         // "/" when empty
	Vault      string      `json:"vault,omitempty"`       // whose files local_bin sees ("default" when empty)
	Sandbox    SandboxMode `json:"sandbox,omitempty"`     // namespaces (when empty) or none
	ApprovalID string      `json:"approval_id,omitempty"` // decide as for a run under it
	Explain    string      `json:"explain,omitempty"`
	Input      bool        `json:"input,omitempty"` // add the input document to the result
}

// DecideResult is the answer of POST /v1/decide: the document of `avfs
// --json policy eval` and the decision's id.
type DecideResult struct {
	PolicyResult
	// DecisionID is the decision's random id (a UUID), under which a
	// decision log (OPA's decision_logs) has it; no vault records it.
	DecisionID string `json:"decision_id"`
	Input      *Input `json:"input,omitempty"`
}

// PrecheckKind is the kind of a PrecheckResult document.
const PrecheckKind = "avfs.precheck"

// PrecheckResult is the answer of POST /v1/precheck (whose body is an
// ExecRequest): what the run would be decided — the same vault, sandbox
// view, policy and approval digest as POST /v1/exec — found without
// running, checkpointing or mounting anything. It is advice (the run
// decides again), the decision of `avfs hook …` through the daemon.
type PrecheckResult struct {
	Kind     string       `json:"kind"` // PrecheckKind
	Decision Decision     `json:"decision"`
	Reasons  []Reason     `json:"reasons"`
	Bundles  []BundleInfo `json:"bundles"`
	Vault    string       `json:"vault"` // the vault's name
	// DecisionID is the decision's id: the vault's record of it and
	// decision logs have it under this id.
	DecisionID string `json:"decision_id"`
	// Approval is, for require_approval only, the approval of exactly this
	// run: a granted one when there is one, else a pending one (created
	// when there was none). Its id is what --approval / approval_id takes.
	Approval *PrecheckApproval `json:"approval,omitempty"`
}

// PrecheckApproval is the approval a PrecheckResult refers to.
type PrecheckApproval struct {
	ID     string `json:"id"`
	Status string `json:"status"` // pending or granted
}

// ServeHealth is the answer of GET /health.
type ServeHealth struct {
	// Status is "ok"; "stale" (?bundles: the last reload failed, 503);
	// or "not_ready" (?bundles or ?plugins with OPA's management plugins:
	// a bundle was never activated or a plugin is not OK, 500).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"` // why not ok
	// BundlesNotActivated are the bundles (or "discovery", or the plugin
	// avfs_policy) keeping ?bundles from ok: never activated once.
	BundlesNotActivated []string `json:"bundles_not_activated,omitempty"`
	// PluginsNotOK are the plugins keeping ?plugins from ok: each one's
	// state (NOT_READY, ERROR, WARN) and message.
	PluginsNotOK map[string]string `json:"plugins_not_ok,omitempty"`
}

// ServeStatus is the answer of GET /v1/status.
type ServeStatus struct {
	Kind         string       `json:"kind"` // ServeStatusKind
	Version      string       `json:"version"`
	PID          int          `json:"pid"`
	Listen       string       `json:"listen"` // unix:PATH or tcp:ADDR
	StartedAt    time.Time    `json:"started_at"`
	UptimeMS     int64        `json:"uptime_ms"`
	Bundles      []BundleInfo `json:"bundles"`   // of the policy in use
	LoadedAt     time.Time    `json:"loaded_at"` // when it was compiled
	RunsInFlight int          `json:"runs_in_flight"`
	RunsTotal    int64        `json:"runs_total"` // runs answered since the start
	Reloads      int64        `json:"reloads"`    // successful reloads since the start
	// LastReloadError is the failure of the last reload, which kept the
	// policy in use; absent once a reload succeeds.
	LastReloadError *ErrorBody `json:"last_reload_error,omitempty"`
	LastReloadAt    *time.Time `json:"last_reload_at,omitempty"`
	// Sandboxes counts the sandboxes the daemon prepared ahead of its
	// runs; absent when it keeps none.
	Sandboxes *ServeSandboxes `json:"sandboxes,omitempty"`
}

// ServeSandboxes is what a daemon's pool of prepared sandboxes did since
// the start: a run takes a prepared sandbox when one of its view is
// waiting, and otherwise has one built for it.
type ServeSandboxes struct {
	Taken    int64  `json:"taken"`         // runs that took a prepared sandbox
	Built    int64  `json:"built"`         // runs whose sandbox was built for them
	Prepared int64  `json:"prepared"`      // sandboxes prepared
	Failed   int64  `json:"failed"`        // preparations that failed
	Waiting  int    `json:"waiting"`       // prepared sandboxes waiting now
	Off      string `json:"off,omitempty"` // why none is prepared (the kernel refused open_tree)
}

// HTTPStatus is the HTTP status of an error document with code c.
func HTTPStatus(c Code) int {
	switch c {
	case CodeUsage, CodeInvalidInput, CodeInvalidPath:
		return 400
	case CodeApproverKey:
		return 401
	case CodeNotFound, CodeVaultNotFound, CodeApprovalNotFound, CodeCheckpointNotFound, CodeVersionNotFound:
		return 404
	case CodeVaultBusy, CodeMountBusy:
		return 409
	case CodeBundleInvalid, CodeSignatureInvalid, CodePolicyError, CodeSandbox:
		return 503
	default:
		return 500
	}
}

// SettleRequest is the body of POST /v1/approvals/settle: do what a
// decided approval of held or previewed changes asks (apply them, or drop
// a denied preview's fork) in the avfs that serves the vault.
type SettleRequest struct {
	Vault    string `json:"vault,omitempty"` // vault name (the current one when empty)
	Approval string `json:"approval"`        // the approval's id
	WaitMS   *int64 `json:"wait_ms,omitempty"`
}

// SettleResult answers POST /v1/approvals/settle: the changes applied to
// the vault (none for a denial).
type SettleResult struct {
	Applied []Change `json:"applied"`
}

// RestoreRequest is the body of POST /v1/restore: return a vault to a
// checkpoint, as `avfs checkpoint restore` does, through the daemon that
// may hold it (a workspace's, which alone may change a vault it keeps
// mounted). The answer is the document `avfs --json checkpoint restore`
// prints.
type RestoreRequest struct {
	Vault      string `json:"vault,omitempty"` // vault name (the current one when empty)
	Checkpoint string `json:"checkpoint"`      // id or name
	WaitMS     *int64 `json:"wait_ms,omitempty"`
}
