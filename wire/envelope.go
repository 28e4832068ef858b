package wire

import (
	"encoding/json"
	"time"
)

// EnvelopeSchemaVersion is the version of the proxy exec envelope.
const EnvelopeSchemaVersion = 1

// EnvelopeKind is the envelope's kind field.
const EnvelopeKind = "proxy_exec_result"

// Envelope is the one JSON document `avfs proxy exec --json` prints. It is
// documented in docs/envelope.md.
type Envelope struct {
	SchemaVersion int    `json:"schema_version"`
	Kind          string `json:"kind"`
	ID            string `json:"id"`    // the execution id
	Vault         string `json:"vault"` // the vault the command ran in
	// ForkedFrom is, for a run in a new fork (proxy exec --fork), the
	// vault it was forked from (left untouched); Vault is the fork.
	ForkedFrom string         `json:"forked_from,omitempty"`
	Decision   Decision       `json:"decision"`
	DecisionID string         `json:"decision_id"` // the id the policy's decision is recorded under (a UUID), "" when the policy made none
	Policy     PolicyReport   `json:"policy"`
	Command    CommandReport  `json:"command"`
	Checkpoint *CheckpointRef `json:"checkpoint"` // taken before the run, or null
	Approval   *ApprovalRef   `json:"approval"`   // the approval asked for or used, or null
	Mount      *MountReport   `json:"mount"`      // how the vault was presented, or null when not run
	Sandbox    *SandboxReport `json:"sandbox"`    // how the command was held, or null when not run
	Process    *ProcessReport `json:"process"`    // null when the command did not run
	Changes    []Change       `json:"changes"`
	// ChangesTotal is the number of changes; Changes lists the first ones
	// by path, at most --max-changes, and ChangesTruncated says some were
	// left out.
	ChangesTotal     int             `json:"changes_total"`
	ChangesTruncated bool            `json:"changes_truncated"`
	Rollback         *RollbackReport `json:"rollback"` // set when --rollback-on-failure restored the checkpoint
	// Effects is the effects policy's decision on what the run did and
	// what became of its changes; null when no effects stage ran (the
	// command did not run, a --readonly run, a policy without one).
	Effects *EffectsReport `json:"effects"`
	// Preview names the throwaway fork a previewed run (proxy exec
	// --preview, or the decision's sandbox.preview) ran in, whose changes
	// wait for the approval; absent otherwise.
	Preview *PreviewReport `json:"preview,omitempty"`
	// Hints are advice about the run (a network_off hint for a command
	// that failed for lack of a network), absent when there is none.
	Hints  []Hint     `json:"hints,omitempty"`
	Timing Timing     `json:"timing"`
	Error  *ErrorBody `json:"error"`
}

// PreviewReport is where a previewed run's changes wait.
type PreviewReport struct {
	Fork string `json:"fork"` // the throwaway fork; granting merges it into the vault, denying deletes it
}

// PolicyReport is the policy part of an envelope.
type PolicyReport struct {
	Reasons []Reason     `json:"reasons"`
	Bundles []BundleInfo `json:"bundles"`
	Trace   []TraceEvent `json:"trace,omitempty"` // with --explain
	EvalUS  int64        `json:"eval_us"`
}

// CommandReport is what was asked to run.
type CommandReport struct {
	Argv  []string `json:"argv"`
	Cwd   string   `json:"cwd"`             // vault-absolute
	Shell string   `json:"shell,omitempty"` // the script given with --shell
}

// CheckpointRef names a checkpoint.
type CheckpointRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// ApprovalRef is an approval as the envelope reports it.
type ApprovalRef struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"` // pending, granted, denied, used, expired
	ExpiresAt time.Time `json:"expires_at"`
}

// MountReport says how the command saw the vault.
type MountReport struct {
	Mode string `json:"mode"` // "fuse" or "materialized"
	Dir  string `json:"dir"`  // where it was mounted or materialised (gone after the run)
	// Discarded counts the entries a --readonly run added, deleted or
	// changed in its materialised copy, all thrown away (a read-only FUSE
	// mount refuses writes instead). Absent when 0.
	Discarded int `json:"discarded,omitempty"`
	// Fallback, set only under --mount-mode auto, says why the vault was
	// materialised rather than mounted with FUSE; absent when FUSE was used
	// or another mode was asked for.
	Fallback *MountFallback `json:"fallback,omitempty"`
}

// MountFallback says why a --mount-mode auto run was given a materialised
// copy instead of a FUSE mount.
type MountFallback struct {
	Reason  FallbackReason `json:"reason"`
	Message string         `json:"message"` // what FUSE's failure said, for people
}

// FallbackReason is why --mount-mode auto did not use FUSE.
type FallbackReason string

// The reasons of a fallback.
const (
	// FallbackFuseUnavailable: FUSE cannot be used by this process at all
	// (no /dev/fuse, no permission to open it, or no fusermount3 for a
	// non-root user); nothing was tried.
	FallbackFuseUnavailable FallbackReason = "fuse_unavailable"
	// FallbackMountNotPermitted: /dev/fuse opens but the mount was refused
	// (EPERM or EACCES from mount(2), or fusermount refused), as in a
	// container without CAP_SYS_ADMIN; now or, remembered, by an earlier
	// run of this process.
	FallbackMountNotPermitted FallbackReason = "mount_not_permitted"
)

// FallbackReasons lists the reasons of a fallback.
var FallbackReasons = []FallbackReason{FallbackFuseUnavailable, FallbackMountNotPermitted}

// ProcessReport is how the command ran. Output that is valid UTF-8 is a
// string; other output is base64 with encoding "base64". Output beyond the
// capture limit keeps its head and tail, with an omission marker line
// between them (utf-8) or at omitted_at (base64).
type ProcessReport struct {
	ExitCode          int    `json:"exit_code"`
	Signal            string `json:"signal"` // "SIGKILL" when a signal ended it, else ""
	TimedOut          bool   `json:"timed_out"`
	DurationMS        int64  `json:"duration_ms"`
	Stdout            string `json:"stdout"`
	Stderr            string `json:"stderr"`
	StdoutEncoding    string `json:"stdout_encoding"` // "utf-8" or "base64"
	StderrEncoding    string `json:"stderr_encoding"`
	StdoutBytes       int64  `json:"stdout_bytes"` // bytes the command wrote
	StderrBytes       int64  `json:"stderr_bytes"`
	StdoutTruncated   bool   `json:"stdout_truncated"`
	StderrTruncated   bool   `json:"stderr_truncated"`
	StdoutOmittedAt   int64  `json:"stdout_omitted_at,omitempty"` // base64 output: byte offset of the cut
	StderrOmittedAt   int64  `json:"stderr_omitted_at,omitempty"`
	KilledDescendants int    `json:"killed_descendants"` // processes it left running that avfs ended
	// Interrupted names the signal avfs received and forwarded ("SIGINT",
	// "SIGTERM") when that cut the run short; absent otherwise.
	Interrupted string `json:"interrupted,omitempty"`
}

// Change is one path the command added, modified or deleted.
type Change struct {
	Path       string `json:"path"`               // vault-absolute; invalid UTF-8 as U+FFFD
	PathB64    string `json:"path_b64,omitempty"` // the path's bytes in base64 when they are not UTF-8 (B64)
	Op         string `json:"op"`                 // added, modified, deleted
	Kind       string `json:"kind"`               // file, dir, symlink, fifo, socket
	SizeBefore *int64 `json:"size_before"`
	SizeAfter  *int64 `json:"size_after"`
	ModeBefore string `json:"mode_before,omitempty"` // octal, "0644"
	ModeAfter  string `json:"mode_after,omitempty"`
}

// RollbackReport says that the vault was put back after a failed run.
type RollbackReport struct {
	Restored   bool          `json:"restored"`
	Checkpoint CheckpointRef `json:"checkpoint"`
	Reason     string        `json:"reason"` // "exit_code" or "timed_out"
}

// Timing breaks the run down by stage, in milliseconds.
type Timing struct {
	PolicyMS     float64 `json:"policy_ms"`
	CheckpointMS float64 `json:"checkpoint_ms"` // waiting for the vault (another run holds it) and taking the checkpoint
	MountMS      float64 `json:"mount_ms"`      // mounting and unmounting (or materialising and syncing back)
	SandboxMS    float64 `json:"sandbox_ms"`    // building the sandbox and tearing it down (0 without one)
	RunMS        float64 `json:"run_ms"`
	SummaryMS    float64 `json:"summary_ms"`
	EffectsMS    float64 `json:"effects_ms"` // listing the changes with their content and deciding on them
	TotalMS      float64 `json:"total_ms"`
}

// ErrorBody is the envelope's error: what kept avfs from doing its part.
// Details are merged into the JSON object beside code and message, as in
// the error document of other commands (bundle_invalid gives file, row,
// col; quota_exceeded gives quota, limit).
type ErrorBody struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"-"`
}

// NewErrorBody describes err for the envelope.
func NewErrorBody(err error) *ErrorBody {
	obj := ErrorObject(err)
	delete(obj, "code")
	delete(obj, "message")
	if len(obj) == 0 {
		obj = nil
	}
	return &ErrorBody{Code: CodeOf(err), Message: err.Error(), Details: obj}
}

// MarshalJSON writes code, message and the details in one object.
func (b ErrorBody) MarshalJSON() ([]byte, error) {
	obj := make(map[string]any, len(b.Details)+2)
	for k, v := range b.Details {
		obj[k] = v
	}
	obj["code"], obj["message"] = b.Code, b.Message
	return json.Marshal(obj)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *ErrorBody) UnmarshalJSON(data []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	code, _ := obj["code"].(string)
	msg, _ := obj["message"].(string)
	delete(obj, "code")
	delete(obj, "message")
	if len(obj) == 0 {
		obj = nil
	}
	*b = ErrorBody{Code: Code(code), Message: msg, Details: obj}
	return nil
}

// Exit statuses of avfs proxy exec, as timeout(1) uses them.
const (
	ExitTimedOut   = 124 // the command ran out of time
	ExitAvfsFailed = 125 // avfs itself failed (bad input, vault, mount)
	ExitNotRun     = 126 // not run: deny or require_approval (or not executable)
	ExitNotFound   = 127 // the program does not exist
)
