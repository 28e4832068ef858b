package mcpserver

import (
	"cmp"
	"context"
	"fmt"
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
		Readonly: in.Readonly,
	}, nil
}

// exec runs one command as proxy exec does. Cancelling the call (the
// client's notifications/cancelled, or a closed session) cancels ctx, and
// the runner then ends the command's whole process tree and cleans up
// before exec returns.
func (h *handlers) exec(ctx context.Context, req *mcp.CallToolRequest, in ExecInput) (*mcp.CallToolResult, *wire.Envelope, error) {
	rreq, err := h.request(in)
	if err != nil {
		return nil, nil, toolError(err)
	}
	p := startProgress(ctx, req, commandText(rreq.Argv, rreq.Shell), h.cfg.ProgressEvery)
	env := h.run(ctx, rreq)
	if a := env.Approval; env.Decision == wire.RequireApproval && a != nil && a.Status == "pending" && env.Process == nil && env.Error == nil {
		note, granted := h.ask(ctx, req, env)
		if !granted {
			p.end(ctx, "not run: approval "+a.ID+" "+note)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: approvalText(env, note)}}}, env, nil
		}
		p.step(ctx, "approval "+a.ID+" granted; running")
		rreq.ApprovalID = a.ID
		env = h.run(ctx, rreq)
	}
	p.end(ctx, summary(env))
	res := &mcp.CallToolResult{IsError: failed(env), Content: []mcp.Content{&mcp.TextContent{Text: summary(env)}}}
	return res, env, nil
}

// run is one runner.Exec with a fresh runner; a runner that cannot be made
// is the envelope's error, as in proxy exec.
func (h *handlers) run(ctx context.Context, rreq runner.Request) *wire.Envelope {
	start := time.Now()
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

// ask asks the user, through the client's elicitation, whether the command
// of env's pending approval may run. A yes grants the approval in the store
// as `avfs approval grant` does (with the configured proof) and returns
// true; otherwise note says why it was not granted. A client without
// elicitation is not asked.
func (h *handlers) ask(ctx context.Context, req *mcp.CallToolRequest, env *wire.Envelope) (note string, granted bool) {
	id := env.Approval.ID
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return "is pending (this client cannot ask the user)", false
	}
	reasons := make([]string, 0, len(env.Policy.Reasons))
	for _, r := range env.Policy.Reasons {
		if r.Decision == wire.RequireApproval {
			reasons = append(reasons, r.ID+": "+r.Message)
		}
	}
	msg := fmt.Sprintf("avfs: the policy asks for your approval to run\n\n  %s\n\nin %s of vault %s.\nReasons:\n  %s\n\nApprove this once (approval %s)?",
		commandText(env.Command.Argv, env.Command.Shell), env.Command.Cwd, env.Vault, strings.Join(reasons, "\n  "), id)
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "run this command once"},
			},
			"required": []string{"approve"},
		},
	})
	switch {
	case err != nil:
		return fmt.Sprintf("is pending (asking the user failed: %v)", err), false
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
		_, err = v.DecideApproval(ctx, id, grant, reason, by, proof)
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
