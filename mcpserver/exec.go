package mcpserver

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
)

// ExecInput is the input of exec: the request fields of `avfs proxy exec`
// that an agent chooses.
type ExecInput struct {
	Argv           []string `json:"argv,omitempty" jsonschema:"the command and its arguments (give argv or shell, not both)"`
	Shell          string   `json:"shell,omitempty" jsonschema:"a script run with /bin/sh -c (give argv or shell, not both)"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"the working directory inside the vault (default /)"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"end the command after this many seconds (default 300)"`
	Vault          string   `json:"vault,omitempty" jsonschema:"the vault (default: the server's vault)"`
	Readonly       bool     `json:"readonly,omitempty" jsonschema:"the command can change nothing: the vault is mounted read-only and no checkpoint is taken"`
	Approval       string   `json:"approval,omitempty" jsonschema:"run under this granted approval id (ap-…)"`
}

// maxOutput is the bytes of stdout and of stderr an exec result keeps, as
// proxy exec's default --max-output.
const maxOutput = 1 << 20

// request is the runner request of in, with proxy exec's defaults.
func (h *handlers) request(in ExecInput) (runner.Request, error) {
	switch {
	case in.Shell != "" && len(in.Argv) > 0:
		return runner.Request{}, wire.Errorf(wire.CodeUsage, "exec: give argv or shell, not both")
	case in.Shell == "" && len(in.Argv) == 0:
		return runner.Request{}, wire.Errorf(wire.CodeUsage, "exec: missing command: give argv or shell")
	case in.TimeoutSeconds < 0:
		return runner.Request{}, wire.Errorf(wire.CodeUsage, "exec: timeout_seconds must not be negative")
	}
	timeout := runner.DefaultTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	return runner.Request{
		Vault: h.vaultOf(in.Vault), Argv: in.Argv, Shell: in.Shell, Cwd: cmp.Or(in.Cwd, "/"),
		Timeout: timeout, KillGrace: runner.DefaultKillGrace, MaxOutput: maxOutput, MaxChanges: runner.DefaultMaxChanges,
		MountMode: runner.ModeAuto, ApprovalID: in.Approval, ApprovalTTL: runner.DefaultTTL, BusyWait: runner.DefaultBusyWait,
		Readonly: in.Readonly, Source: wire.SourceMCP,
	}, nil
}

// exec runs one command as proxy exec does. Cancelling the call (the
// client's notifications/cancelled, or a closed session) cancels ctx, and
// the runner then ends the command's whole process tree and cleans up
// before exec returns.
//
// A run that needs approval, from a client that can elicit, is answered
// with an input request (SEP-2322: the SDK turns it into an
// elicitation/create request for clients on older protocol versions) and
// a signed request state holding the not-run envelope; the retry that
// carries the user's answer grants (or denies) the approval and runs the
// command under it.
func (h *handlers) exec(ctx context.Context, req *mcp.CallToolRequest, in ExecInput) (*mcp.CallToolResult, *wire.Envelope, error) {
	rreq, err := h.request(in)
	if err != nil {
		return nil, nil, toolError(err)
	}
	ctx, done, err := h.calls.start(ctx)
	if err != nil {
		return nil, nil, toolError(err)
	}
	defer done()
	p := startProgress(ctx, req, commandText(rreq.Argv, rreq.Shell), h.cfg.ProgressEvery)
	var env *wire.Envelope
	if req.Params.RequestState != "" {
		// The retry of a call whose approval was asked of the user.
		if env, err = h.openState(req.Params.RequestState, rreq); err != nil {
			p.end(ctx, "refused")
			return nil, nil, toolError(err)
		}
		id := env.Approval.ID
		note, granted := h.answer(ctx, req, env)
		if !granted {
			p.end(ctx, "not run: approval "+id+" "+note)
			return notRun(env, note), env, nil
		}
		p.step(ctx, "approval "+id+" granted; running")
		rreq.ApprovalID = id
		env = h.run(ctx, rreq)
	} else {
		env = h.run(ctx, rreq)
		if pendingApproval(env) {
			if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
				state, err := h.sealState(env)
				if err == nil {
					p.end(ctx, "asking the user to approve "+env.Approval.ID)
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approveKey: elicitation(env)}, RequestState: state}, nil, nil
				}
			}
			note := "is pending (this client cannot ask the user)"
			p.end(ctx, "not run: approval "+env.Approval.ID+" "+note)
			return notRun(env, note), env, nil
		}
	}
	p.end(ctx, summary(env))
	res := &mcp.CallToolResult{IsError: failed(env), Content: []mcp.Content{&mcp.TextContent{Text: summary(env)}}}
	return res, env, nil
}

// calls are the exec calls in progress, so that a shutdown can cancel them
// and wait for their clean-up (see Server.Drain).
type calls struct {
	mu       sync.Mutex
	draining bool
	cancels  map[*context.CancelCauseFunc]struct{}
	wg       sync.WaitGroup
}

// start registers a call: its context is cancelled by drain; done must be
// called when it has ended. While draining, calls are refused.
func (c *calls) start(ctx context.Context) (context.Context, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return nil, nil, wire.Errorf(wire.CodeInternal, "exec: the server is shutting down")
	}
	if c.cancels == nil {
		c.cancels = map[*context.CancelCauseFunc]struct{}{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	c.cancels[key] = struct{}{}
	c.wg.Add(1)
	return ctx, func() {
		c.mu.Lock()
		delete(c.cancels, key)
		c.mu.Unlock()
		cancel(nil)
		c.wg.Done()
	}, nil
}

func (c *calls) drain(ctx context.Context, cause error) error {
	c.mu.Lock()
	c.draining = true
	for cancel := range c.cancels {
		(*cancel)(cause)
	}
	c.mu.Unlock()
	ended := make(chan struct{})
	go func() { c.wg.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// approveKey names the elicitation of an approval among a call's input
// requests.
const approveKey = "approve"

// pendingApproval says whether env is a run that waits for approval.
func pendingApproval(env *wire.Envelope) bool {
	a := env.Approval
	return env.Decision == wire.RequireApproval && a != nil && a.Status == "pending" && env.Process == nil && env.Error == nil
}

// notRun is the result of a run left waiting for approval.
func notRun(env *wire.Envelope, note string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: approvalText(env, note)}}}
}

// run is one runner.Exec with a fresh runner; a runner that cannot be made
// is the envelope's error, as in proxy exec.
func (h *handlers) run(ctx context.Context, rreq runner.Request) *wire.Envelope {
	start := time.Now()
	if h.cfg.Forward != nil {
		if env, ok := h.cfg.Forward(ctx, rreq); ok {
			return env
		}
	}
	r, err := h.cfg.NewRunner(ctx)
	if err != nil {
		env, _ := runner.Failed(rreq, start, err)
		return env
	}
	env, _ := r.Exec(ctx, rreq)
	return env
}

// failed says whether an exec result is an error for the model: the
// command was not run (deny, approval needed, avfs failed) or it exited
// non-zero.
func failed(env *wire.Envelope) bool {
	return env.Error != nil || env.Process == nil || env.Process.ExitCode != 0
}

// elicitation is the question put to the user for env's pending approval:
// the command, where, and the rules that asked; a yes/no answer.
func elicitation(env *wire.Envelope) *mcp.ElicitParams {
	reasons := make([]string, 0, len(env.Policy.Reasons))
	for _, r := range env.Policy.Reasons {
		if r.Decision == wire.RequireApproval {
			reasons = append(reasons, r.ID+": "+r.Message)
		}
	}
	msg := fmt.Sprintf("avfs: the policy asks for your approval to run\n\n  %s\n\nin %s of vault %s.\nReasons:\n  %s\n\nApprove this once (approval %s)?",
		commandText(env.Command.Argv, env.Command.Shell), env.Command.Cwd, env.Vault, strings.Join(reasons, "\n  "), env.Approval.ID)
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "run this command once"},
			},
			"required": []string{"approve"},
		},
	}
}

// answer applies the user's answer to env's approval: accept with approve
// true grants it in the store as `avfs approval grant` does (with the
// configured proof) and returns true; decline denies it; anything else
// leaves it pending. note says why it was not granted.
func (h *handlers) answer(ctx context.Context, req *mcp.CallToolRequest, env *wire.Envelope) (note string, granted bool) {
	id := env.Approval.ID
	res, _ := req.Params.InputResponses[approveKey].(*mcp.ElicitResult)
	switch {
	case res == nil:
		return "is pending (the client sent no answer)", false
	case res.Action == "decline":
		if err := h.decide(ctx, env.Vault, id, false, "declined through MCP elicitation", req); err != nil {
			return fmt.Sprintf("was declined by the user (recording it failed: %v)", err), false
		}
		return "was declined by the user", false
	case res.Action != "accept" || res.Content["approve"] != true:
		return "is pending (the user did not approve)", false
	}
	if err := h.decide(ctx, env.Vault, id, true, "granted through MCP elicitation", req); err != nil {
		return fmt.Sprintf("is pending (granting it failed: %v)", err), false
	}
	return "", true
}

// sealState is the request state of env's elicitation: the envelope,
// signed with the server's key, so that a retry can only answer the
// approval this server asked about.
func (h *handlers) sealState(env *wire.Envelope) (string, error) {
	b, err := json.Marshal(env)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, h.stateKey)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// openState checks and opens a request state made by sealState, for the
// retry of the same command in the same vault.
func (h *handlers) openState(state string, rreq runner.Request) (*wire.Envelope, error) {
	bad := wire.Errorf(wire.CodeInvalidInput, "exec: the request state is not one this server made for this command")
	body, sig, ok := strings.Cut(state, ".")
	if !ok {
		return nil, bad
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return nil, bad
	}
	m := hmac.New(sha256.New, h.stateKey)
	m.Write(b)
	if !hmac.Equal(got, m.Sum(nil)) {
		return nil, bad
	}
	var env wire.Envelope
	if err := json.Unmarshal(b, &env); err != nil || env.Approval == nil {
		return nil, bad
	}
	if env.Vault != rreq.Vault || env.Command.Shell != rreq.Shell || !slices.Equal(env.Command.Argv, rreq.Argv) && (len(env.Command.Argv) > 0 || len(rreq.Argv) > 0) {
		return nil, bad
	}
	return &env, nil
}

// decide grants or denies approval id in vault name, as `avfs approval
// grant|deny` does, on behalf of the calling client.
func (h *handlers) decide(ctx context.Context, name, id string, grant bool, reason string, req *mcp.CallToolRequest) error {
	var prove func(vault.Approval) (string, error)
	if grant && h.cfg.GrantProof != nil {
		var err error
		if prove, err = h.cfg.GrantProof(); err != nil {
			return err
		}
	}
	by := "mcp"
	if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
		by += ":" + ci.Name
	}
	return h.withVault(ctx, name, func(v *vault.Vault) error {
		ap, err := v.Approval(ctx, id)
		if err != nil {
			return err
		}
		proof := ""
		if prove != nil {
			if proof, err = prove(ap); err != nil {
				return err
			}
		}
		ap, err = v.DecideApproval(ctx, id, grant, reason, by, proof)
		if err == nil {
			// Held or previewed changes apply as the run left them (or a
			// denied preview's fork goes).
			if h.cfg.Settle != nil {
				_, err = h.cfg.Settle(ctx, v, ap)
			} else {
				_, err = h.cfg.Store.SettleApproval(ctx, v, ap, nil)
			}
		}
		return err
	})
}

// approvalText is the text of a run left waiting for approval: the
// approval id and how a person grants it.
func approvalText(env *wire.Envelope, note string) string {
	id := env.Approval.ID
	return fmt.Sprintf("not run: the policy requires approval; approval %s %s. A person grants it with `avfs approval grant %s --vault %s`; "+
		"then call exec again with the same command, cwd and vault and \"approval\": %q.", id, note, id, env.Vault, id)
}

// summary is the short text of an exec result, for clients that do not
// read structured content.
func summary(env *wire.Envelope) string {
	parts := []string{"decision " + string(env.Decision)}
	for _, r := range env.Policy.Reasons {
		parts = append(parts, r.ID+": "+r.Message)
	}
	if p := env.Process; p != nil {
		s := fmt.Sprintf("exit %d", p.ExitCode)
		if p.TimedOut {
			s += " (timed out)"
		}
		parts = append(parts, s, fmt.Sprintf("%d change(s)", env.ChangesTotal))
	} else {
		parts = append(parts, "not run")
	}
	if env.Checkpoint != nil {
		parts = append(parts, fmt.Sprintf("checkpoint %d (undo with checkpoint_restore)", env.Checkpoint.ID))
	}
	if env.Error != nil {
		parts = append(parts, "error "+string(env.Error.Code)+": "+env.Error.Message)
	}
	text := strings.Join(parts, "; ")
	if p := env.Process; p != nil {
		if p.StdoutEncoding == "utf-8" && p.Stdout != "" {
			text += "\n--- stdout\n" + p.Stdout
		}
		if p.StderrEncoding == "utf-8" && p.Stderr != "" {
			text += "\n--- stderr\n" + p.Stderr
		}
	}
	return text
}

// progress sends notifications/progress for one call, when the client
// asked for them with a progress token: at the start, every interval
// while the command runs, and at the end. Failures to notify are ignored
// (the run goes on).
type progress struct {
	req   *mcp.CallToolRequest
	token any
	mu    sync.Mutex // serialises notifications, so that progress increases
	n     float64
	stop  chan struct{}
	done  chan struct{}
}

func startProgress(ctx context.Context, req *mcp.CallToolRequest, cmd string, every time.Duration) *progress {
	p := &progress{req: req, token: req.Params.GetProgressToken()}
	if p.token == nil {
		return p
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	p.notify(ctx, "started: "+cmd)
	start := time.Now()
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.notify(ctx, fmt.Sprintf("running: %s (%ds)", cmd, int(time.Since(start).Seconds())))
			}
		}
	}()
	return p
}

// step reports a stage (the ticker keeps going).
func (p *progress) step(ctx context.Context, msg string) {
	if p.token != nil {
		p.notify(ctx, msg)
	}
}

func (p *progress) end(ctx context.Context, msg string) {
	if p.token == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.notify(ctx, "done: "+msg)
}

func (p *progress) notify(ctx context.Context, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}
