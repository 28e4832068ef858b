package runner

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"avfs/engine"
	"avfs/mount"
	"avfs/sandbox"
	"avfs/vault"
	"avfs/wire"
)

// Defaults of a run.
const (
	DefaultTimeout = 300 * time.Second
	DefaultTTL     = time.Hour // how long an approval stays valid
	// DefaultBusyWait is how long a run waits for the vault while another
	// run (or a writer mount) holds it.
	DefaultBusyWait = 30 * time.Second
)

// LockExec is the vault lock a run that may change the vault holds from
// before its checkpoint to after its change summary, so that runs on one
// vault take turns: a checkpoint, a change summary and a rollback only ever
// see the run's own changes, and materialised copies never overwrite each
// other's changes. Its checkpoint is pinned meanwhile (see
// vault.SaveCheckpointMarked): nobody deletes what it rolls back to.
const LockExec = vault.LockRun

// Mount modes.
const (
	ModeAuto        = "auto"
	ModeFUSE        = "fuse"
	ModeMaterialize = "materialize"
)

// Runner runs commands in the vaults of one store under one policy.
type Runner struct {
	Store  *vault.Store
	Policy *engine.Policy
	// LoadPolicy, used when Policy is nil, loads the policy. Exec calls it
	// once per run, beside opening the vault, and reports its error (a
	// broken bundle, a bad signature) in the envelope.
	LoadPolicy  func(context.Context) (*engine.Policy, error)
	Exe         string   // the avfs binary that guards runs (`avfs proxy guard`); "" for none (the next run cleans up after a killed one)
	HostEnv     []string // where allow-listed variables come from (os.Environ())
	ExtraEnv    []string // proxy.env of the config: KEY or KEY=VALUE
	ApproverKey []byte   // the approver secret; when set, grants must carry its MAC
	// ApproverPublicKey, when set, is the approvers' Ed25519 public key:
	// grants must carry a signature it verifies (see GrantSignature), and
	// ApproverKey is not used. Unlike the secret, it lets nobody grant.
	ApproverPublicKey ed25519.PublicKey
	// RunDir is the root of the run directories (see OpenRunDir), where
	// mount points, materialised copies and what cleans up after a killed
	// avfs live: $AVFS_HOME/run for the CLI. "" means
	// <TempDir>/avfs-run-<euid>.
	RunDir  string
	TempDir string // where RunDir is when it is not given ("" = os.TempDir())
	// Sandbox is how commands are held.
	Sandbox SandboxConfig
	// Trusted are the files avfs trusts for its decisions (config, policy
	// directories and bundles, keys): a run without a sandbox is refused
	// while its command could rewrite any of them (see checkTrust).
	Trusted []string
	// Attached is the vault this process keeps mounted as a workspace, if
	// any: its runs work in that mount (see Attached).
	Attached *Attached
	// Vaults, when set, keeps vaults open across runs (avfs serve); nil
	// opens and closes the vault in each run.
	Vaults *VaultCache
	// Sandboxes, when set, prepares sandboxes ahead of the runs that take
	// them (avfs serve, see NewSandboxPool); nil builds each for its run.
	Sandboxes *sandbox.Pool
	// SkipEffects turns the effects stage off (policy.skip_effects in the
	// config): the changes of a run stay as the first decision had them.
	SkipEffects bool
	// DecisionLog, when set, is told every decision of the policy about a
	// run (Exec's decide stage, Precheck) under its decision id, beside
	// the vault's record of it (see recordDecision): manage.DecisionLog
	// sends them to OPA's decision-log plugin. nil logs nothing.
	DecisionLog DecisionLogger

	// fuseState, when set, replaces the process's (processFUSE): tests
	// fake the mount with it.
	fuseState *fuseState
}

// Request is one `avfs proxy exec`.
type Request struct {
	Vault             string
	Argv              []string // the command (or nil with Shell)
	Shell             string   // a script for /bin/sh -c
	Cwd               string   // vault path to run in ("/" when empty)
	Timeout           time.Duration
	KillGrace         time.Duration
	MaxOutput         int64
	Stdout, Stderr    io.Writer // live copies of the output (--stream); nil for none
	Stdin             io.Reader // nil: /dev/null
	Env               []string  // --env KEY or KEY=VALUE
	Mountpoint        string    // where to mount ("" = a private temporary directory)
	MountMode         string    // auto, fuse or materialize
	ApprovalID        string    // run under this granted approval
	ApprovalTTL       time.Duration
	RollbackOnFailure bool
	// BusyWait is how long to wait while another run or a writer mount
	// holds the vault (0: fail at once with vault_busy).
	BusyWait time.Duration
	Explain  string // policy trace mode
	Readonly bool   // mount read-only: the command can change nothing
	// MaxChanges is the number of changes listed in the envelope (the
	// first by path); 0 means DefaultMaxChanges, a negative number all.
	MaxChanges int
	// Sandbox is --sandbox: auto, namespaces or none ("" for the
	// config's Runner.Sandbox.Mode).
	Sandbox string
	// AllowWritableTrust runs a command without a sandbox even though it
	// could rewrite what avfs trusts (--allow-writable-trust).
	AllowWritableTrust bool
	// Source is the way the request came into avfs, recorded with its
	// decision (see recordDecision): "" is wire.SourceExec for Exec and
	// wire.SourcePrecheck for Precheck. Set by avfs, never by the agent.
	Source wire.DecisionSource
	// Fork, when set, is the name of a new fork of Vault the command runs
	// in (proxy exec --fork): the open stage makes it (O(1): metadata
	// only, see vault.Store.Fork; already_exists when the name is taken)
	// and the run then uses it as its vault, leaving Vault untouched. The
	// envelope's vault names the fork, forked_from Vault. A run that ends
	// before its command started (denied, an approval asked for, a
	// failure) deletes the fork again.
	Fork string
	// Preview runs a command that needs approval first in a throwaway
	// fork with the network off, and asks approval for its changes
	// (proxy exec --preview; the decision's sandbox.preview does the same
	// without it): see execution.preview.
	Preview bool
	// Progress, when set, is told how far the copy of a materialised
	// vault has got (vault.ExportOptions.Progress: entries and bytes),
	// before the command starts; a FUSE mount copies nothing and does
	// not call it. It is called on the goroutine of Exec.
	Progress vault.ProgressFunc
}

// DefaultMaxChanges is how many changes an envelope lists unless asked
// otherwise: enough for a build, while npm install (tens of thousands of
// files) does not make a document of megabytes.
const DefaultMaxChanges = 1000

// envAllow are the host variables a command sees; nothing else passes
// unless asked for with --env or proxy.env.
var envAllow = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME"}

// secretEnv are the approver variables: they never reach a command, even
// when asked for.
var secretEnv = []string{"AVFS_APPROVER_KEY", "AVFS_APPROVER_SIGNING_KEY"}

// NewID returns a new execution id.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "ex-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Exec runs one request through the pipeline and returns the envelope and
// the exit status (timeout(1)'s convention). It always returns an envelope;
// avfs's own failures are in its error field with status 125.
func (r *Runner) Exec(ctx context.Context, req Request) (*wire.Envelope, int) {
	start := time.Now()
	env := newEnvelope(req)
	status := r.exec(ctx, req, env)
	env.Timing.TotalMS = ms(time.Since(start))
	return env, status
}

// Failed is the envelope, and status 125, of a request that failed before
// Exec could take it (an unreadable config file): the same document a
// harness gets from every other run, with nothing done. start is when the
// request began, for timing.total_ms.
func Failed(req Request, start time.Time, err error) (*wire.Envelope, int) {
	env := newEnvelope(req)
	status := fail(env, err)
	env.Timing.TotalMS = max(ms(time.Since(start)), 0.001)
	return env, status
}

// newEnvelope is the envelope of a run that has not started: denied, with
// nothing done.
func newEnvelope(req Request) *wire.Envelope {
	env := &wire.Envelope{
		SchemaVersion: wire.EnvelopeSchemaVersion, Kind: wire.EnvelopeKind, ID: NewID(), Vault: req.Vault,
		Decision: wire.Deny,
		Policy:   wire.PolicyReport{Reasons: []wire.Reason{}, Bundles: []wire.BundleInfo{}},
		Command:  wire.CommandReport{Argv: req.Argv, Cwd: req.Cwd, Shell: req.Shell},
		Changes:  []wire.Change{},
	}
	if env.Command.Argv == nil {
		env.Command.Argv = []string{}
	}
	return env
}

// fail records avfs's own failure.
func fail(env *wire.Envelope, err error) int {
	env.Error = wire.NewErrorBody(err)
	return wire.ExitAvfsFailed
}

// startPolicy returns a function that waits for the policy: r.Policy, or
// what r.LoadPolicy gives, loaded from now on in its own goroutine.
func (r *Runner) startPolicy(ctx context.Context) func() (*engine.Policy, error) {
	if r.Policy != nil || r.LoadPolicy == nil {
		return func() (*engine.Policy, error) {
			if r.Policy == nil {
				return nil, wire.Errorf(wire.CodeInternal, "proxy exec: no policy to decide with")
			}
			return r.Policy, nil
		}
	}
	done := make(chan struct{})
	var p *engine.Policy
	var err error
	go func() {
		defer close(done)
		p, err = r.LoadPolicy(ctx)
	}()
	return func() (*engine.Policy, error) {
		<-done
		return p, err
	}
}

// exec runs req through the stages of a run, in order, each a method of
// one execution. A stage either fails (the error, wrapped with the
// stage's name, becomes the envelope's error in one place: exit 125),
// ends the run early with a status of its own (deny, approval), or hands
// on to the next. What a stage sets up is undone by the cleanups, last
// first, whatever happened.
func (r *Runner) exec(ctx context.Context, req Request, out *wire.Envelope) int {
	if r.Sandboxes != nil {
		defer r.Sandboxes.Busy()() // after release: nothing is prepared while a run is under way
	}
	x := &execution{r: r, req: req, out: out}
	defer x.release(context.WithoutCancel(ctx))
	return x.through(ctx, x.stages())
}

// stage is one step of a run: a method of its execution.
type stage struct {
	name string
	run  func(context.Context) error
}

// stages are the stages of a run, in order.
func (x *execution) stages() []stage {
	return []stage{
		{"request", x.check},
		{"open", x.open},
		{"decide", x.decide},
		{"preview", x.previewFork},
		{"lock", x.lock},
		{"checkpoint", x.checkpoint},
		{"mount", x.mount},
		{"run", x.run},
		{"unmount", x.unmount},
		{"summary", x.summarize},
		{"effects", x.effects},
		{"approval", x.previewApproval},
		{"audit", x.audit},
	}
}

// through runs the stages in order until one fails (x.fail) or ends the
// run, and returns the run's exit status.
func (x *execution) through(ctx context.Context, stages []stage) int {
	for _, s := range stages {
		if err := s.run(ctx); err != nil {
			return x.fail(ctx, s.name, err)
		}
		if x.stopped {
			return x.status
		}
	}
	return x.status
}

// execution is one run going through the stages of exec.
type execution struct {
	r   *Runner
	req Request
	out *wire.Envelope

	cwd     string // vault-absolute
	v       *vault.Vault
	info    vault.Info
	policy  func() (*engine.Policy, error)
	probe   func() error // the sandbox probe, under auto and namespaces
	view    view
	res     wire.PolicyResult // the decision, once decided
	decided bool              // the policy decided (res holds its decision)
	digest  string
	input   *wire.Input // the first decision's input, once parsed
	// preview: the run goes to a throwaway fork (Request.Preview); parent
	// is then the vault it was forked from, where the approval goes.
	preview     bool
	parent      *vault.Vault
	keepPreview func()         // keeps the preview's fork past the run
	details     map[string]any // of the audit event
	busy        time.Time      // until when to wait for the vault
	cp          *vault.Checkpoint
	mark        *vault.Mark
	ws          *workspace
	proc        ProcResult
	ran         bool      // the command started
	listed      bool      // the changes are in the envelope
	started     time.Time // of the current stage

	cleanups []func(context.Context)
	stopped  bool // a stage ended the run with status
	status   int

	// programs are those of the input's commands, in order: what the
	// hints know of what ran.
	programs []string
}

// stop ends the run after this stage with status.
func (x *execution) stop(status int) { x.stopped, x.status = true, status }

// defer adds a cleanup, run by release (last first).
func (x *execution) later(f func(context.Context)) { x.cleanups = append(x.cleanups, f) }

func (x *execution) release(ctx context.Context) {
	for i := len(x.cleanups) - 1; i >= 0; i-- {
		x.cleanups[i](ctx)
	}
}

// fail makes err, from stage, the envelope's error: exit 125. A *wire.Error
// keeps its code; the message says which stage failed unless it does.
//
// A failure after the policy decided (a mount, the host's file system, the
// vault) reports the decision made and the rules that fired beside the
// error: what was decided is not undone by what failed after. One before
// it reports deny, as newEnvelope does, with no reasons or those saying
// why nothing could be decided (the command did not parse, the policy did
// not load).
//
// A run that fails before its command started leaves no checkpoint behind
// (see dropCheckpoint): the envelope's checkpoint is then null.
func (x *execution) fail(ctx context.Context, stage string, err error) int {
	if !strings.HasPrefix(err.Error(), "proxy exec: ") {
		err = fmt.Errorf("proxy exec: %s: %w", stage, err)
	}
	if x.decided {
		x.reportDecision()
	}
	if !x.ran {
		x.dropCheckpoint(ctx)
	} else if !x.listed {
		// What the command changed before avfs failed (a full disk at
		// unmount) landed in the vault: the envelope lists it. Listing
		// only reads, so it works on a full disk; should it fail too,
		// the changes stay empty and the first error is reported.
		_ = x.listChanges(ctx)
	}
	return fail(x.out, err)
}

// dropCheckpoint removes the checkpoint of a run whose command never
// started (a mount or a sandbox refused, a --cwd that is no directory):
// the vault is as the checkpoint has it, and a run that did nothing must
// not leave one to prune. The run's mark pins it (see
// vault.SaveCheckpointMarked), so the mark is released first; the run
// still holds LockExec, so nobody restores the checkpoint or changes the
// vault meanwhile, and nothing has changed since the mark (the command
// never ran). A checkpoint that cannot be removed stays, and the envelope
// names it.
func (x *execution) dropCheckpoint(ctx context.Context) {
	if x.cp == nil || x.ran {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if x.mark != nil {
		if err := x.v.Release(ctx, *x.mark); err != nil {
			return
		}
		x.mark = nil
	}
	if _, err := x.v.DeleteCheckpoint(ctx, strconv.FormatInt(x.cp.ID, 10)); err != nil {
		return
	}
	x.cp, x.out.Checkpoint = nil, nil
}

// reportDecision puts the decision made, x.res, in the envelope.
func (x *execution) reportDecision() {
	res := x.res
	x.out.Decision = res.Decision
	x.out.Policy = wire.PolicyReport{Reasons: res.Reasons, Bundles: res.Bundles, Trace: res.Trace, EvalUS: res.EvalUS}
	if x.out.Policy.Reasons == nil {
		x.out.Policy.Reasons = []wire.Reason{}
	}
	if x.out.Policy.Bundles == nil {
		x.out.Policy.Bundles = []wire.BundleInfo{}
	}
}

// check validates the request.
func (x *execution) check(context.Context) error {
	cwd, err := vault.CleanPath(x.req.Cwd)
	if err != nil {
		return fmt.Errorf("proxy exec: --cwd: %w", err)
	}
	x.cwd = cwd
	x.out.Command.Cwd = cwd
	switch x.req.MountMode {
	case "":
		x.req.MountMode = ModeAuto
	case ModeAuto, ModeFUSE, ModeMaterialize:
	default:
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --mount-mode must be auto, fuse or materialize, not %q", x.req.MountMode)
	}
	if _, err := x.r.sandboxMode(x.req); err != nil {
		return err
	}
	if err := x.r.checkEnv(x.req); err != nil {
		return err
	}
	if x.req.ApprovalTTL <= 0 {
		x.req.ApprovalTTL = DefaultTTL
	}
	return nil
}

// open opens the vault while the policy loads (bundles read and compiled)
// and the kernel is asked for a sandbox.
func (x *execution) open(ctx context.Context) error {
	x.started = time.Now()
	x.policy = x.r.startPolicy(ctx)
	x.probe = x.r.startProbe(x.req)
	x.r.cleanStale()
	if err := x.fork(ctx); err != nil {
		return err
	}
	cache := x.r.Vaults
	if x.req.Fork != "" {
		cache = nil // a fork of one run is not kept open after it
	}
	v, release, err := cache.Open(ctx, x.r.Store, x.req.Vault, true)
	if err != nil {
		return err
	}
	x.v = v
	x.later(func(context.Context) { release(keepVault(x.out.Error)) })
	if x.info, err = v.Info(ctx); err != nil {
		return err
	}
	if err := x.checkAttached(); err != nil {
		return err
	}
	at := ""
	if a := x.r.attachedTo(x.info.Name); a != nil {
		at = a.Dir // a --readonly run too: its own mount is shown there
	}
	if x.view, err = x.r.resolveView(x.req, x.probe, at); err != nil {
		return err
	}
	if x.view.input.Mode == wire.SandboxNone && !x.req.AllowWritableTrust {
		return checkTrust(x.r.Trusted, x.view.input.Reason)
	}
	return nil
}

// decide parses the command and asks the policy; a deny or a new approval
// request ends the run here.
func (x *execution) decide(ctx context.Context) error {
	req, v, cwd := x.req, x.v, x.cwd
	// The words are classified by the policy's program specs; a policy
	// that did not load leaves the default ones, so that a malformed
	// command is still reported as such first.
	p, policyErr := x.policy()
	var programs *engine.Programs
	if policyErr == nil {
		programs = p.Programs()
	}
	input, err := x.parse(ctx, programs)
	if err != nil {
		x.out.Policy.Reasons = []wire.Reason{{ID: "avfs.input.invalid", Decision: wire.Deny, Message: "the command could not be parsed: " + err.Error()}}
		x.out.Timing.PolicyMS = ms(time.Since(x.started))
		_ = v.Event(ctx, "exec", cwd, map[string]any{"id": x.out.ID, "decision": wire.Deny, "error": err.Error()})
		return fmt.Errorf("proxy exec: %w", err)
	}
	if err := policyErr; err != nil {
		x.out.Policy.Reasons = []wire.Reason{{ID: engine.ReasonFailClosed, Decision: wire.Deny, Message: "denied because the policy could not be loaded: " + err.Error()}}
		x.out.Timing.PolicyMS = ms(time.Since(x.started))
		_ = v.Event(ctx, "exec", cwd, map[string]any{"id": x.out.ID, "decision": wire.Deny, "error": err.Error()})
		return fmt.Errorf("proxy exec: load policy: %w", err)
	}
	x.input = input
	res, err := p.Decide(ctx, input, engine.DecideOptions{Explain: req.Explain})
	if err != nil {
		return err
	}
	for _, c := range input.Commands {
		x.programs = append(x.programs, c.Program)
	}
	x.res, x.decided = res, true
	x.reportDecision()
	x.out.Timing.PolicyMS = ms(time.Since(x.started))
	if x.out.DecisionID, err = x.recordDecision(ctx, input, res, wire.SourceExec); err != nil {
		return err
	}
	x.digest = x.r.digest(req, cwd, x.info.Name, res.Bundles, x.view.input.Mode)
	x.details = map[string]any{"id": x.out.ID, "decision_id": x.out.DecisionID, "decision": res.Decision, "argv": req.Argv, "shell": req.Shell, "reasons": reasonIDs(res.Reasons)}
	switch res.Decision {
	case wire.Deny:
		if err := v.Event(ctx, "exec", cwd, x.details); err != nil {
			return err
		}
		x.stop(wire.ExitNotRun)
	case wire.RequireApproval:
		if req.ApprovalID != "" {
			return nil // checked once the vault is ours
		}
		if req.Preview || res.Sandbox.Preview {
			x.preview = true // run in a throwaway fork, then ask (previewFork)
			return nil
		}
		a, err := x.createApproval(ctx, res, x.digest)
		if err != nil {
			return err
		}
		x.out.Approval = &wire.ApprovalRef{ID: a.ID, Status: a.Status, ExpiresAt: a.ExpiresAt.UTC()}
		x.stop(wire.ExitNotRun)
	}
	return nil
}

// parse builds the policy input of the run: the command read with
// programs (the policy's specs; nil for the default ones) in the run's
// view, with the vault's facts and the caller's options.
func (x *execution) parse(ctx context.Context, programs *engine.Programs) (*wire.Input, error) {
	req := x.req
	cmdEnv := x.r.environment(req, x.view, "", x.out.ID)
	return engine.Parse(ctx, engine.ParseRequest{
		Argv: req.Argv, Shell: req.Shell, Cwd: x.cwd, Env: envNames(cmdEnv), PathEnv: lookup(cmdEnv, "PATH"),
		Vault:     wire.VaultInput{Name: x.info.Name, Files: x.info.Files, Bytes: x.info.Bytes, Quotas: wire.QuotaInput(x.info.Quota), Parent: parentName(x.info)},
		Request:   wire.RequestInput{TimeoutMS: req.Timeout.Milliseconds(), Readonly: req.Readonly, ApprovalID: req.ApprovalID},
		Sandbox:   x.view.input,
		Programs:  programs,
		Workspace: vaultFiles{x.v},
	})
}

// createApproval records a pending approval of the run, bound to digest,
// for the decision res.
func (x *execution) createApproval(ctx context.Context, res wire.PolicyResult, digest string) (vault.Approval, error) {
	req := x.req
	return x.v.CreateApproval(ctx, vault.ApprovalRequest{Argv: req.Argv, Shell: req.Shell, Cwd: x.cwd, Env: req.Env, Readonly: req.Readonly, Vault: x.info.Name,
		BundleRevision: revisions(res.Bundles), Reasons: reasonIDs(res.Reasons), Digest: digest, TTL: req.ApprovalTTL})
}

// lock waits for the vault (before an approval is used up) and uses the
// approval a require_approval run names.
func (x *execution) lock(ctx context.Context) error {
	x.started = time.Now()
	v, req := x.v, x.req
	x.busy = time.Now().Add(req.BusyWait)
	if !req.Readonly {
		// The vault's lock is held per process: runs of one process (a
		// daemon's) take turns here first, waiting as long as for another's.
		release, err := takeLocal(ctx, v.Path(), x.out.ID, x.busy)
		if err != nil {
			return fmt.Errorf("proxy exec: waited %s for the vault: %w", req.BusyWait, err)
		}
		x.later(func(context.Context) { release() })
		err = waitBusy(ctx, x.busy, func() error { return v.Lock(ctx, LockExec, x.out.ID) })
		if err != nil {
			return fmt.Errorf("proxy exec: waited %s for the vault: %w", req.BusyWait, err)
		}
		x.later(func(ctx context.Context) { v.Unlock(ctx, LockExec) })
		// History stays bounded (vault.Retention): once the run's mark is
		// released, a pass runs if the run's writes made one due. One that
		// fails is left to the next run, the mount's background or gc.
		x.later(func(ctx context.Context) { _, _, _ = v.RetainIfDue(ctx) })
		// Nor may a writer mount of someone else's change the vault under
		// the checkpoint and the mark (the workspace's own mount is the
		// run's).
		if x.attached() == nil {
			err = waitBusy(ctx, x.busy, func() error { return mountedBy(ctx, v) })
			if err != nil {
				return fmt.Errorf("proxy exec: waited %s for the vault: %w", req.BusyWait, err)
			}
		}
		// Marks are only taken under the lock: any left are of runs whose
		// avfs was killed, and would keep old rows forever.
		if _, err := v.ReleaseMarks(ctx); err != nil {
			return err
		}
	}
	if x.res.Decision != wire.RequireApproval || x.preview {
		return nil
	}
	a, err := v.UseApproval(ctx, req.ApprovalID, x.digest, x.out.ID, x.r.checkGrant)
	if err != nil {
		if a2, gerr := v.Approval(ctx, req.ApprovalID); gerr == nil {
			x.out.Approval = &wire.ApprovalRef{ID: a2.ID, Status: a2.Status, ExpiresAt: a2.ExpiresAt.UTC()}
		}
		x.out.Error = wire.NewErrorBody(err)
		_ = v.Event(ctx, "exec", x.cwd, x.details)
		x.stop(wire.ExitNotRun)
		return nil
	}
	x.out.Approval = &wire.ApprovalRef{ID: a.ID, Status: a.Status, ExpiresAt: a.ExpiresAt.UTC()}
	return nil
}

// checkpoint takes the checkpoint the decision (or --rollback-on-failure)
// asks for, and the mark the change summary starts from. A program that
// is on no PATH entry runs nothing: no checkpoint for it. Nor does a
// read-only run get one, whatever the decision: it cannot change the
// vault. The checkpoint and the mark are taken in one transaction, the
// mark pinning the checkpoint until the run ends (the mark's release):
// a concurrent `checkpoint delete` or prune cannot take away what
// --rollback-on-failure restores.
func (x *execution) checkpoint(ctx context.Context) error {
	v, req, res := x.v, x.req, x.res
	// A read-only run changes nothing (and holds no lock to mark under).
	if req.Readonly {
		x.out.Timing.CheckpointMS = ms(time.Since(x.started))
		return nil
	}
	missing := req.Shell == "" && Missing(req.Argv[0], x.r.environment(req, x.view, "/", x.out.ID), req.Mountpoint)
	var m vault.Mark
	var err error
	if !missing && (res.Decision == wire.AllowWithCheckpoint || res.Decision == wire.RequireApproval || req.RollbackOnFailure) {
		var c vault.Checkpoint
		c, m, err = v.SaveCheckpointMarked(ctx, x.out.ID, "before proxy exec "+x.out.ID, x.out.ID)
		if err != nil {
			return err
		}
		x.cp = &c
		x.out.Checkpoint = &wire.CheckpointRef{ID: c.ID, Name: c.Name}
	} else if m, err = v.Mark(ctx, x.out.ID); err != nil {
		return err
	}
	x.mark = &m
	x.later(func(ctx context.Context) { // unless dropCheckpoint did it
		if x.mark != nil {
			v.Release(ctx, *x.mark)
		}
	})
	x.out.Timing.CheckpointMS = ms(time.Since(x.started))
	return nil
}

// mount presents the vault as a host directory: mounted, or materialised.
func (x *execution) mount(ctx context.Context) error {
	x.started = time.Now()
	var ws *workspace
	var err error
	if a := x.attached(); a != nil {
		ws, err = x.r.presentAttached(a)
	} else {
		ws, err = x.r.present(ctx, x.v, x.info.Name, x.req, x.busy)
	}
	if err != nil {
		return err
	}
	x.ws = ws
	x.later(func(ctx context.Context) { // unless unmount did it
		if x.ws != nil {
			// Before the command ran there is nothing to bring back.
			x.ws.close(ctx, x.v, x.req.Readonly || !x.ran)
		}
	})
	x.out.Mount = &wire.MountReport{Mode: ws.mode, Dir: ws.dir, Fallback: ws.fallback}
	dir := filepath.Join(ws.dir, filepath.FromSlash(strings.TrimPrefix(x.cwd, "/")))
	x.out.Timing.MountMS = ms(time.Since(x.started))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --cwd %s is not a directory in the vault", x.cwd).With("cwd", x.cwd)
	}
	return nil
}

// run runs the command, in its sandbox unless the view has none.
func (x *execution) run(ctx context.Context) error {
	x.started = time.Now()
	req, ws := x.req, x.ws
	argv := req.Argv
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	spec := ProcSpec{
		Argv: argv, Stdin: req.Stdin, Timeout: req.Timeout, KillGrace: req.KillGrace, MaxOutput: req.MaxOutput,
		Stdout: req.Stdout, Stderr: req.Stderr,
	}
	x.out.Sandbox = x.view.report(x.res.Sandbox, ws.dir)
	if x.view.input.Mode == wire.SandboxNamespaces {
		sb, err := x.r.sandboxSpec(x.req, x.view, x.res.Sandbox, ws, x.cwd, x.info.Name)
		if err != nil {
			return err
		}
		spec.Sandbox, spec.Exe, spec.Sandboxes = sb, x.r.exe(), x.r.Sandboxes
		spec.Env = x.r.environment(req, x.view, x.view.input.Workspace, x.out.ID)
		spec.Dir = sb.Dir
	} else {
		spec.Env = x.r.environment(req, x.view, ws.dir, x.out.ID)
		spec.Dir = filepath.Join(ws.dir, filepath.FromSlash(strings.TrimPrefix(x.cwd, "/")))
		spec.DirServed = ws.session != nil || ws.attached
	}
	proc, err := Start(ctx, spec)
	x.ran = err == nil
	if wire.HasCode(err, wire.CodeSandbox) {
		x.r.forgetProbe()
	}
	if err != nil {
		x.out.Timing.RunMS = ms(time.Since(x.started))
		return err
	}
	var g *guard
	if ws.session != nil {
		g = startGuard(x.r.Exe, ws.base)
	}
	x.proc, err = proc.Wait()
	if g != nil {
		x.later(func(context.Context) { g.stop() }) // after the mount and the run's directory are gone
	}
	x.out.Timing.RunMS = ms(time.Since(x.started))
	if x.out.Sandbox != nil && x.out.Sandbox.Mode == wire.SandboxNamespaces {
		x.out.Sandbox.Landlock = proc.Landlock()
		x.out.Timing.SandboxMS = ms(x.proc.SandboxSetup + x.proc.SandboxTeardown)
	}
	if err != nil {
		return err
	}
	x.out.Process = processReport(x.proc)
	x.out.Hints = x.hints()
	return nil
}

// unmount unmounts (or syncs a materialised copy back), always.
func (x *execution) unmount(ctx context.Context) error {
	t := time.Now()
	ws := x.ws
	x.ws = nil
	err := ws.close(context.WithoutCancel(ctx), x.v, x.req.Readonly)
	x.out.Mount.Discarded = ws.discarded
	x.out.Timing.MountMS += ms(time.Since(t))
	if x.r.Sandbox.CacheDir != "" && x.view.input.Mode == wire.SandboxNamespaces {
		_ = sandbox.TrimCacheDue(x.r.cacheDir(x.info.Name), x.r.Sandbox.cacheMax(), time.Now())
	}
	return err
}

// listChanges puts the changes since the run's mark in the envelope, the
// first --max-changes of them. It only reads the vault. A run that fails
// after its command started lists them too (see fail).
func (x *execution) listChanges(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	t := time.Now()
	var changes []vault.Change
	if x.mark != nil {
		var err error
		if changes, err = x.v.ChangesSince(ctx, *x.mark); err != nil {
			return err
		}
	}
	x.out.Changes = wireChanges(changes)
	x.out.ChangesTotal = len(x.out.Changes)
	limit := x.req.MaxChanges
	if limit == 0 {
		limit = DefaultMaxChanges
	}
	if limit > 0 && len(x.out.Changes) > limit {
		x.out.Changes, x.out.ChangesTruncated = x.out.Changes[:limit], true
	}
	x.out.Timing.SummaryMS = ms(time.Since(t))
	x.listed = true
	return nil
}

// summarize lists the changes and takes the command's exit status.
func (x *execution) summarize(ctx context.Context) error {
	if err := x.listChanges(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	x.status = exitStatus(x.proc)
	return nil
}

// audit rolls back if asked (unless the effects stage already put the
// changes aside) and audits the run.
func (x *execution) audit(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	v, req, pr := x.v, x.req, x.proc
	kept := x.out.Effects == nil || x.out.Effects.Outcome == wire.EffectsKept
	if kept && req.RollbackOnFailure && x.cp != nil && (pr.TimedOut || exitStatus(pr) != 0) {
		if _, err := x.r.restore(ctx, v, x.info.Name, strconv.FormatInt(x.cp.ID, 10)); err != nil {
			return fmt.Errorf("roll back: %w", err)
		}
		reason := "exit_code"
		if pr.TimedOut {
			reason = "timed_out"
		}
		x.out.Rollback = &wire.RollbackReport{Restored: true, Checkpoint: wire.CheckpointRef{ID: x.cp.ID, Name: x.cp.Name}, Reason: reason}
	}
	d := x.details
	d["exit_code"], d["timed_out"], d["changes"] = pr.ExitCode, pr.TimedOut, x.out.ChangesTotal
	if x.out.Rollback != nil {
		d["rolled_back"] = true
	}
	if e := x.out.Effects; e != nil {
		d["effects"], d["effects_outcome"], d["effects_reasons"] = e.Decision, e.Outcome, reasonIDs(e.Reasons)
	}
	if x.parent != nil {
		v = x.parent // a preview's run is the vault's, not its fork's
		d["preview"] = x.out.Preview.Fork
	}
	return v.Event(ctx, "exec", x.cwd, d)
}

// exitStatus follows timeout(1).
func exitStatus(pr ProcResult) int {
	if pr.TimedOut {
		return wire.ExitTimedOut
	}
	return pr.ExitCode
}

func parentName(info vault.Info) string {
	if info.Parent == nil {
		return ""
	}
	return info.Parent.Name
}

func reasonIDs(rs []wire.Reason) []string {
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func revisions(bs []wire.BundleInfo) string {
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		parts = append(parts, b.Name+"@"+b.Revision)
	}
	return strings.Join(parts, ",")
}

// digest binds an approval to exactly what runs: argv or script, cwd,
// vault, the policy bundles' revisions, the variables asked for with
// --env (GIT_SSH_COMMAND=… or LD_PRELOAD=… change what a command does),
// and whether a sandbox holds it: a grant for a sandboxed run does not
// let the same command run with the host's whole authority.
func (r *Runner) digest(req Request, cwd, vaultName string, bs []wire.BundleInfo, mode wire.SandboxMode) string {
	env := slices.Clone(req.Env)
	slices.Sort(env)
	b, _ := json.Marshal(struct {
		Argv    []string `json:"argv"`
		Shell   string   `json:"shell"`
		Cwd     string   `json:"cwd"`
		Vault   string   `json:"vault"`
		Bundles string   `json:"bundles"`
		Env     []string `json:"env,omitempty"`
		// omitempty keeps the digests of approvals made before it.
		Readonly bool `json:"readonly,omitempty"`
		// "none" without a sandbox; omitted in one, so that approvals
		// made before sandboxes (when every run had none) only ever
		// match a run held tighter than they were granted for.
		Unsandboxed string `json:"sandbox,omitempty"`
	}{req.Argv, req.Shell, cwd, vaultName, revisions(bs), env, req.Readonly, unsandboxed(mode)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func unsandboxed(m wire.SandboxMode) string {
	if m == wire.SandboxNamespaces {
		return ""
	}
	return string(wire.SandboxNone)
}

// environment is the command's whole environment: the allow-listed host
// variables, those asked for, and avfs's own. mnt is where the command
// sees the vault; HOME is the view's home in a sandbox (with the tool
// caches pointed into its cache), the vault itself without one.
func (r *Runner) environment(req Request, vw view, mnt, id string) []string {
	host := r.HostEnv
	vars := map[string]string{}
	for _, k := range envAllow {
		if val, ok := lookupOK(host, k); ok {
			vars[k] = val
		}
	}
	if _, ok := vars["PATH"]; !ok {
		vars["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for _, kv := range append(append([]string{}, r.ExtraEnv...), req.Env...) {
		k, val, has := strings.Cut(kv, "=")
		if k == "" || slices.Contains(secretEnv, k) {
			continue
		}
		if !has {
			var ok bool
			if val, ok = lookupOK(host, k); !ok {
				continue
			}
		}
		vars[k] = val
	}
	vars["HOME"] = mnt
	if vw.input.Mode == wire.SandboxNamespaces {
		vars["HOME"] = vw.input.Home
		if r.Sandbox.CacheDir != "" {
			for k, rel := range cacheEnv {
				vars[k] = path.Join(vw.input.Home, ".cache", rel)
			}
		}
	}
	vars["AVFS_VAULT"] = req.Vault
	vars["AVFS_EXEC_ID"] = id
	vars["AVFS_MOUNTPOINT"] = mnt
	out := make([]string, 0, len(vars))
	for k, val := range vars {
		out = append(out, k+"="+val)
	}
	sort.Strings(out)
	return out
}

// checkEnv fails with invalid_input, naming the entry and where it comes
// from (details: key "proxy.env" or "--env", env the variable's name),
// when a variable the command would be given holds a NUL byte: in an
// entry of proxy.env or --env, or in the host's value a KEY entry or the
// allow-list takes. No process can be given one, and a run must learn
// that before any workspace work (a checkpoint, a mount).
func (r *Runner) checkEnv(req Request) error {
	bad := func(where, name, what string) error {
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: %s entry %q: %s holds a NUL byte; a command's environment cannot", where, name, what).
			With("key", where).With("env", name)
	}
	for _, k := range envAllow {
		if val, ok := lookupOK(r.HostEnv, k); ok && strings.IndexByte(val, 0) >= 0 {
			return bad("host environment", k, "its value")
		}
	}
	for _, src := range []struct {
		where   string
		entries []string
	}{{"proxy.env", r.ExtraEnv}, {"--env", req.Env}} {
		for _, kv := range src.entries {
			k, val, has := strings.Cut(kv, "=")
			if k == "" || slices.Contains(secretEnv, k) {
				continue // never passed (see environment)
			}
			name := strings.ReplaceAll(k, "\x00", `\0`)
			switch {
			case strings.IndexByte(k, 0) >= 0:
				return bad(src.where, name, "its name")
			case has && strings.IndexByte(val, 0) >= 0:
				return bad(src.where, name, "its value")
			case !has:
				if hv, ok := lookupOK(r.HostEnv, k); ok && strings.IndexByte(hv, 0) >= 0 {
					return bad(src.where, name, "the host's value it takes")
				}
			}
		}
	}
	return nil
}

func lookupOK(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func lookup(env []string, key string) string {
	v, _ := lookupOK(env, key)
	return v
}

func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	return names
}

// encode gives a captured stream as JSON text when it is UTF-8 that reads
// as text, else as base64.
func encode(o Output) (text, encoding string, omittedAt int64) {
	if !o.Truncated {
		b := o.Bytes()
		if textual(b) {
			return string(b), "utf-8", 0
		}
		return base64.StdEncoding.EncodeToString(b), "base64", 0
	}
	if textual(o.Head) && textual(o.Tail) {
		marker := fmt.Sprintf("\n[avfs: %d bytes omitted]\n", o.Total-int64(len(o.Head))-int64(len(o.Tail)))
		return string(o.Head) + marker + string(o.Tail), "utf-8", 0
	}
	return base64.StdEncoding.EncodeToString(o.Bytes()), "base64", int64(len(o.Head))
}

// textual reports whether b is UTF-8 and not mostly control characters:
// each of those takes six bytes in JSON (\u0000), so a megabyte of NULs
// would make six of text where base64 makes 1.3. Newlines, tabs, carriage
// returns and the escapes of terminal colours count as text.
func textual(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	n := 0
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != 0x1b {
			n++
		}
	}
	return n*4 <= len(b)
}

func processReport(pr ProcResult) *wire.ProcessReport {
	p := &wire.ProcessReport{ExitCode: pr.ExitCode, Signal: pr.Signal, TimedOut: pr.TimedOut, DurationMS: pr.Duration.Milliseconds(),
		StdoutBytes: pr.Stdout.Total, StderrBytes: pr.Stderr.Total, StdoutTruncated: pr.Stdout.Truncated, StderrTruncated: pr.Stderr.Truncated,
		KilledDescendants: len(pr.Killed) + pr.KilledInSandbox, Interrupted: pr.Interrupted}
	p.Stdout, p.StdoutEncoding, p.StdoutOmittedAt = encode(pr.Stdout)
	p.Stderr, p.StderrEncoding, p.StderrOmittedAt = encode(pr.Stderr)
	return p
}

func wireChanges(cs []vault.Change) []wire.Change { return vault.WireChanges(cs) }

// workspace is the vault presented as a directory for one run.
type workspace struct {
	mode    string
	dir     string // what the command sees
	base    string // our private temporary directory
	session *mount.Session
	since   time.Time // materialised: when the copy was complete
	locked  bool      // materialised: we hold the vault's mount lock
	// For --mountpoint: made says avfs created dir (and removes it);
	// kept is the mode of an empty directory a copy was made in (emptied
	// and given its mode back afterwards).
	made bool
	kept fs.FileMode
	// ident is the identity of a --mountpoint that is made or kept: what
	// removeCopy checks before it touches it.
	ident *dirID
	run   *ExecDir // the run directory (base) and its lock
	// discarded: what a read-only run changed in its materialised copy.
	discarded int
	// copied: the materialised copy's directory as exported. The command
	// may replace dir (by a symlink to a host directory, say): what is
	// there then is neither read back nor removed.
	copied os.FileInfo
	// attached: dir is the workspace's live mount (see Attached), which
	// stays when the run ends.
	attached bool
	// fallback: why --mount-mode auto materialised the vault (nil when
	// it mounted it, or another mode was asked for).
	fallback *wire.MountFallback
}

// copyIntact fails with host_io unless dir is still the directory the
// materialised copy was exported to.
func (w *workspace) copyIntact() error {
	fi, err := os.Lstat(w.dir)
	if err != nil || !fi.IsDir() || w.copied == nil || !os.SameFile(fi, w.copied) {
		return wire.Errorf(wire.CodeHostIO, "proxy exec: the copy at %s was replaced during the run; it is not read back or removed", w.dir).With("dir", w.dir)
	}
	return nil
}

// unlock releases the mount lock of a materialised copy.
func (w *workspace) unlock(v *vault.Vault) {
	if w.locked {
		_ = v.Unlock(context.Background(), vault.LockMount)
		w.locked = false
	}
}

// mountedBy fails with vault_busy while a live process holds the vault's
// mount lock (a writer mount, or a materialised run).
func mountedBy(ctx context.Context, v *vault.Vault) error {
	h, err := v.LockHolder(ctx, vault.LockMount)
	if err != nil || h == nil {
		return err
	}
	return wire.Errorf(wire.CodeVaultBusy, "the vault is mounted for writing by pid %d (%s)", h.PID, h.Info).With("holder_pid", h.PID)
}

// waitBusy calls f until it does not fail with vault_busy, or until is
// past, or ctx is done; it returns f's last error.
func waitBusy(ctx context.Context, until time.Time, f func() error) error {
	delay := 10 * time.Millisecond
	for {
		err := f()
		left := time.Until(until)
		if !wire.HasCode(err, wire.CodeVaultBusy) || left <= 0 {
			return err
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

func (r *Runner) tempDir() string {
	if r.TempDir != "" {
		return r.TempDir
	}
	return os.TempDir()
}

// present presents the vault for a run as req.MountMode asks. Under
// auto, a FUSE mount that is refused (mount.ErrNotPermitted: a container
// without CAP_SYS_ADMIN) gives way to a materialised copy, and the
// workspace's fallback says why; so does a process that cannot use FUSE
// at all, or was refused a mount not long ago (see fuseState). Under
// fuse, a refused mount fails with fuse_unavailable saying what works.
func (r *Runner) present(ctx context.Context, v *vault.Vault, name string, req Request, busyUntil time.Time) (*workspace, error) {
	f := r.fuse()
	mode, fallback := f.choose(req.MountMode)
	if mode == ModeFUSE && req.MountMode == ModeFUSE {
		if err := f.available(); err != nil {
			return nil, fmt.Errorf("proxy exec: --mount-mode fuse: %w", err)
		}
	}
	ws, err := r.presentAs(ctx, v, name, req, mode, busyUntil)
	switch {
	case err == nil:
	case !errors.Is(err, mount.ErrNotPermitted):
		return nil, err
	case req.MountMode == ModeFUSE:
		return nil, fuseRefusedErr(err)
	default:
		fallback = refusedFallback(err, "")
		if ws, err = r.presentAs(ctx, v, name, req, ModeMaterialize, busyUntil); err != nil {
			return nil, err
		}
	}
	ws.fallback = fallback
	return ws, nil
}

// presentAs presents the vault in mode, fuse or materialize.
func (r *Runner) presentAs(ctx context.Context, v *vault.Vault, name string, req Request, mode string, busyUntil time.Time) (*workspace, error) {
	ws := &workspace{mode: map[string]string{ModeFUSE: "fuse", ModeMaterialize: "materialized"}[mode]}
	run, err := r.newRun()
	if err != nil {
		return nil, err
	}
	ws.run = run
	ws.base = run.Dir
	ws.dir = filepath.Join(ws.base, "root")
	if req.Mountpoint != "" {
		if err := ws.useMountpoint(req.Mountpoint, mode == ModeMaterialize); err != nil {
			ws.run.Remove()
			return nil, err
		}
	}
	rec := mountpointRecord{Dir: ws.dir, Materialized: mode == ModeMaterialize, Made: ws.made, Kept: uint32(ws.kept), ID: ws.ident}
	if mode == ModeFUSE {
		rec.FsName = "avfs:" + name
	}
	if err := ws.run.writeRecord(rec); err != nil {
		ws.removeCopy()
		ws.run.Remove()
		return nil, err
	}
	if mode == ModeMaterialize {
		// The copy is synced back at the end: no writer mount may change
		// the vault meanwhile.
		if !req.Readonly {
			if err := waitBusy(ctx, busyUntil, func() error { return v.Lock(ctx, vault.LockMount, ws.dir) }); err != nil {
				ws.run.Remove()
				return nil, fmt.Errorf("proxy exec: materialise the vault: %w", err)
			}
			ws.locked = true
		}
		if _, err := v.ExportWith(ctx, "/", ws.dir, vault.ExportOptions{Force: ws.kept != 0 || ws.made, Progress: req.Progress}); err != nil {
			ws.unlock(v)
			ws.removeCopy()
			ws.run.Remove()
			return nil, fmt.Errorf("proxy exec: materialise the vault: %w", err)
		}
		ws.since = time.Now()
		if ws.copied, err = os.Lstat(ws.dir); err != nil {
			ws.unlock(v)
			ws.removeCopy()
			ws.run.Remove()
			return nil, wire.Errorf(wire.CodeHostIO, "proxy exec: materialise the vault: %v", err)
		}
		return ws, nil
	}
	if req.Mountpoint == "" {
		if err := os.Mkdir(ws.dir, 0o700); err != nil {
			ws.run.Remove()
			return nil, wire.Errorf(wire.CodeHostIO, "proxy exec: %w", err)
		}
	}
	// A writer mount of the vault (one left by a killed run, say) makes the
	// mount fail with vault_busy until it is gone.
	err = waitBusy(ctx, busyUntil, func() error {
		if !req.Readonly { // nothing is mounted while the lock is visibly held
			if err := mountedBy(ctx, v); err != nil {
				return err
			}
		}
		return r.mountHere(ctx, v, name, ws, req.Readonly)
	})
	if err != nil {
		ws.removeCopy()
		ws.run.Remove()
		return nil, err
	}
	return ws, nil
}

// useMountpoint makes the directory given with --mountpoint what the
// command sees. A missing one is made (and removed afterwards). A
// materialised copy needs it empty: the copy is made in it and removed
// from it afterwards, leaving it as it was.
func (w *workspace) useMountpoint(p string, copyIn bool) error {
	dir, err := filepath.Abs(p)
	if err != nil {
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --mountpoint: %v", err)
	}
	w.dir = dir
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A copy is exported into it (Export merges into the empty
		// directory): made here, its identity is known before it fills.
		if err := os.Mkdir(dir, 0o700); err != nil {
			return wire.Errorf(wire.CodeHostIO, "proxy exec: --mountpoint: %v", err).With("mountpoint", dir)
		}
		w.made = true
		fi, err := os.Lstat(dir)
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "proxy exec: --mountpoint: %v", err).With("mountpoint", dir)
		}
		w.ident = idOf(fi)
		return nil
	case err != nil:
		return wire.Errorf(wire.CodeHostIO, "proxy exec: --mountpoint: %v", err).With("mountpoint", dir)
	case !fi.IsDir():
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --mountpoint %s is not a directory", dir).With("mountpoint", dir)
	}
	if !copyIn {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "proxy exec: --mountpoint: %v", err).With("mountpoint", dir)
	}
	if len(ents) > 0 {
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --mountpoint %s is not empty: a materialised copy of the vault needs an empty directory (or none)", dir).
			With("mountpoint", dir)
	}
	w.kept = fi.Mode()
	w.ident = idOf(fi)
	return nil
}

// removeCopy removes what the command saw when it is not under w.base: a
// materialised copy made at --mountpoint, or a mount point avfs made (only
// when empty), or it empties the --mountpoint a copy was made in and gives
// it its mode back. It acts only on the directory w.ident identifies (see
// removeAt): one that was replaced since is left, with errNotProven.
func (w *workspace) removeCopy() error {
	if w.base == "" || strings.HasPrefix(w.dir, w.base+string(filepath.Separator)) {
		return nil
	}
	if w.mode == "materialized" && w.copied != nil && w.copyIntact() != nil {
		return nil // not ours any more (close reports it)
	}
	switch {
	case w.made:
		return removeAt(w.dir, w.ident, true, w.mode != "materialized", 0)
	case w.kept != 0:
		return removeAt(w.dir, w.ident, false, false, w.kept)
	}
	return nil
}

// mountHere mounts the vault at ws.dir, served by this process. The command
// must then be started with ProcSpec.DirServed.
func (r *Runner) mountHere(ctx context.Context, v *vault.Vault, name string, ws *workspace, readonly bool) error {
	sess, err := r.fuse().mountFUSE(ctx, v, ws.dir, mount.Options{ReadOnly: readonly, FsName: "avfs:" + name, SpillDir: ws.base})
	if err != nil {
		return fmt.Errorf("proxy exec: %w", err)
	}
	ws.session = sess
	return nil
}

// close unmounts (or syncs a materialised copy back) and removes the temporary directory.
func (w *workspace) close(ctx context.Context, v *vault.Vault, readonly bool) error {
	var err error
	if w.session != nil {
		// The command's processes have all ended; anything else still
		// inside (a process that escaped the command's tree) is ended so
		// the mount can go, and a mount that still will not go is detached.
		uerr := w.session.Unmount(false)
		if wire.HasCode(uerr, wire.CodeMountBusy) {
			mount.KillHolders(w.dir, 2*time.Second)
			uerr = w.session.Unmount(false)
		}
		if uerr != nil {
			if lerr := w.session.Unmount(true); lerr != nil {
				err = fmt.Errorf("proxy exec: %w", lerr)
			}
		}
		if n := w.session.Panics(); n > 0 && err == nil {
			err = wire.Errorf(wire.CodeInternal, "proxy exec: the mount answered %d request(s) with EIO after an internal failure", n)
		}
		if serr := w.session.Err(); serr != nil && err == nil {
			err = fmt.Errorf("proxy exec: %w", serr)
		}
		w.session = nil
	} else if w.mode == "materialized" && w.copyIntact() != nil {
		err = w.copyIntact()
	} else if w.mode == "materialized" && !readonly {
		if _, serr := v.Sync(ctx, w.dir, w.since); serr != nil {
			err = fmt.Errorf("proxy exec: bring the changes back: %w", serr)
		}
	} else if w.mode == "materialized" {
		n, cerr := v.Unsynced(ctx, w.dir, w.since)
		if cerr != nil {
			err = fmt.Errorf("proxy exec: compare the read-only copy: %w", cerr)
		}
		w.discarded = n
	}
	w.unlock(v)
	if rerr := w.removeCopy(); rerr != nil && err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = wire.Errorf(wire.CodeHostIO, "proxy exec: remove the copy in %s: %v", w.dir, rerr)
	}
	if rerr := w.run.Remove(); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// cleanStale cleans up after the runs whose avfs is gone, in the run root
// (see RunDir.CleanStale): a run root that fails its checks is left for
// present to report.
func (r *Runner) cleanStale() {
	d, err := r.runRoot()
	if err != nil {
		return
	}
	d.CleanStale()
}

// fork makes the new fork a --fork run runs in (Request.Fork) and points
// the run at it; nothing when the request asks for none. The fork is
// deleted again (a cleanup) unless the command started.
func (x *execution) fork(ctx context.Context) error {
	if x.req.Fork == "" {
		return nil
	}
	parent := x.req.Vault
	if _, err := x.r.Store.ForkInfo(ctx, parent, x.req.Fork); err != nil {
		return fmt.Errorf("proxy exec: --fork: %w", err)
	}
	x.req.Vault = x.req.Fork
	x.out.Vault, x.out.ForkedFrom = x.req.Fork, parent
	// Registered before the fork is opened (uncached): cleanups run last
	// first, so it is closed, and the run's locks released, before it is
	// deleted.
	x.later(func(ctx context.Context) {
		if !x.ran {
			_ = x.r.Store.Delete(ctx, x.req.Fork, false)
		}
	})
	return nil
}
