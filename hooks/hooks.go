// Package hooks answers the tool hooks of agent harnesses (Claude Code,
// Codex, Gemini CLI) with avfs's policy: a shell command the policy lets
// run is rewritten to run through `avfs proxy exec` (checkpoint, vault,
// sandbox, envelope); one it denies, or that waits for a person's
// approval, is blocked with the reason. See docs/integrations.md.
//
// The adapters are pure functions of the hook's stdin and a Decider; Run
// wraps them so that they fail closed: an error, a panic, a deadline or
// an unreadable, oversized or unparsable payload gives the harness's
// blocking answer, never an exit status the harness reads as "run it".
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"avfs/wire"
)

// Harness names an agent harness whose hooks avfs answers.
type Harness string

// Harnesses.
const (
	ClaudeCode Harness = "claude-code" // Claude Code: PreToolUse, PostToolUse, PermissionRequest
	Codex      Harness = "codex"       // OpenAI Codex CLI: PreToolUse, PermissionRequest
	Gemini     Harness = "gemini"      // Gemini CLI: BeforeTool
)

// Harnesses lists every harness, in the order the CLI shows them.
var Harnesses = []Harness{ClaudeCode, Codex, Gemini}

// Defaults of Options.
const (
	DefaultTimeout  = 5 * time.Second // to decide, stdin read included
	DefaultMaxInput = 8 << 20         // bytes of hook payload read
)

// Command is a shell command a hook asks about.
type Command struct {
	Script  string        // the shell script, as the harness would run it with sh -c
	Cwd     string        // the vault directory it runs in ("/" is the vault's root)
	Timeout time.Duration // the harness's timeout for it; 0 for proxy exec's default
	// Server is the avfs serve socket the rewrite runs through (its
	// --server); "" for none. A decider decides through it when it is a
	// workspace's (Vault is set then too).
	Server string
	// Vault is the vault the command is decided for and runs in: a
	// workspace's, or the rewrite's; "" for the hook's own (--vault).
	Vault string
}

// Workspace is a project directory that is its vault's mount (`avfs
// workspace up DIR`): a shell command whose directory is in it runs in
// that vault at the same path, through the avfs that serves it, so that it
// sees what the harness's own file tools wrote there.
type Workspace struct {
	Dir    string // the project directory
	Vault  string // its vault
	Server string // the serve socket of the avfs serving it; "" while it is down
}

// Verdict is what the policy says about a Command.
type Verdict struct {
	Decision wire.Decision
	Reasons  []wire.Reason
	Vault    string // the vault the command is decided for (and runs in)
	// Approval is, for require_approval, the approval of exactly this run:
	// granted, or pending (created when there was none). nil otherwise.
	Approval *Approval
}

// Approval is the state of an approval a Verdict names.
type Approval struct {
	ID     string
	Status string // "pending" or "granted"
}

// Decider decides a command as `avfs proxy exec` would, and finds (or
// requests) its approval. The adapters call it at most once per hook; an
// error blocks the command.
type Decider interface {
	Decide(ctx context.Context, c Command) (Verdict, error)
}

// Options are the hook command's settings.
type Options struct {
	// Exe is the avfs binary the rewritten commands run (an absolute path,
	// so the harness's PATH does not matter).
	Exe string
	// Project is the host directory that is the vault's root: a payload cwd
	// beneath it runs in the same directory of the vault, any other cwd at
	// the vault's root. "" takes the payload's cwd itself (the vault root).
	Project string
	// Headless is Claude Code without a person to ask (claude -p):
	// require_approval answers defer instead of ask.
	Headless bool
	// Server is the avfs serve socket (proxy exec's --server) the
	// rewritten commands run through; "" runs them in-process. A rewrite
	// naming another socket is not avfs's own (see ParseRewrite).
	Server   string
	Timeout  time.Duration // DefaultTimeout when 0
	MaxInput int64         // DefaultMaxInput when 0
	// Workspace finds the workspace a directory is in; nil (or a nil
	// *Workspace) for none, and then Project applies. A workspace that is
	// down blocks the call: its commands would run in a vault the
	// harness's file tools do not see. An error blocks it too.
	Workspace func(dir string) (*Workspace, error)
}

// Answer is what a hook command prints and how it exits.
type Answer struct {
	Stdout []byte // a JSON document, or empty for no opinion
	Stderr string // shown to the harness with exit 2
	Exit   int
}

// adapter is one harness's hook: handle answers a payload; block is the
// answer that stops the tool whatever went wrong.
type adapter struct {
	handle func(ctx context.Context, d Decider, o Options, payload []byte) (Answer, error)
	block  func(reason string) Answer
}

var adapters = map[Harness]adapter{
	ClaudeCode: {handleClaude, blockClaude},
	Codex:      {handleCodex, blockCodex},
	Gemini:     {handleGemini, blockGemini},
}

// Block is h's blocking answer with reason, for a failure before Run could
// answer (avfs could not start: no home, a flag it cannot read). An
// unknown harness gets exit status 2 with the reason on stderr.
func Block(h Harness, reason string) Answer {
	if a, ok := adapters[h]; ok {
		return a.block(reason)
	}
	return Answer{Stderr: reason + "\n", Exit: 2}
}

// Run reads one hook payload from stdin and answers it for h. It never
// fails: whatever goes wrong (an unknown harness, stdin unreadable, larger
// than o.MaxInput or not the harness's JSON, the decider's error or
// panic, o.Timeout passing) is the harness's blocking answer with the
// reason. It returns by the deadline even while d or stdin still hang
// (their goroutine is left to the process's exit).
func Run(ctx context.Context, h Harness, d Decider, o Options, stdin io.Reader) Answer {
	a, ok := adapters[h]
	if !ok {
		return Answer{Stderr: fmt.Sprintf("avfs hook: unknown harness %q", h), Exit: 2}
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan Answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- a.block(fmt.Sprintf("avfs hook failed (panic: %v); the command is blocked", p))
			}
		}()
		payload, err := readLimited(stdin, o.MaxInput)
		if err == nil {
			var ans Answer
			if ans, err = a.handle(ctx, d, o, payload); err == nil {
				done <- ans
				return
			}
		}
		done <- a.block(fmt.Sprintf("avfs hook failed: %v; the command is blocked", err))
	}()
	select {
	case ans := <-done:
		return ans
	case <-ctx.Done():
		return a.block(fmt.Sprintf("avfs hook failed: no decision within %s; the command is blocked", timeout))
	}
}

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxInput
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the hook payload is larger than %d bytes", limit)
	}
	return b, nil
}

// decodeStrict decodes one JSON object into v; anything after it is an
// error.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the hook payload is not valid JSON: %w", err)
	}
	if dec.More() {
		return errors.New("the hook payload has more than one JSON document")
	}
	return nil
}

// marshal encodes an answer (no HTML escaping, one line).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// vaultCwd is the vault directory of a host cwd: its path beneath
// project, else "/".
func vaultCwd(project, cwd string) string {
	if project == "" || cwd == "" {
		return "/"
	}
	rel, err := filepath.Rel(filepath.Clean(project), filepath.Clean(cwd))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "/"
	}
	if rel == "." {
		return "/"
	}
	return "/" + filepath.ToSlash(rel)
}

// shellCommand is the Command of script, run in the host directory dir
// (the payload's cwd, or Gemini's directory): in the workspace dir is in,
// if any, else in the vault of o.Project (or cwd).
func shellCommand(o Options, script, cwd, dir string) (Command, error) {
	ws, err := workspaceOf(o, dir)
	if err != nil {
		return Command{}, err
	}
	if ws != nil {
		return Command{Script: script, Cwd: vaultCwd(ws.Dir, dir), Vault: ws.Vault, Server: ws.Server}, nil
	}
	return Command{Script: script, Cwd: vaultCwd(projectOf(o, cwd), dir)}, nil
}

// workspaceOf is the workspace dir is in (nil for none); one that is down
// is an error.
func workspaceOf(o Options, dir string) (*Workspace, error) {
	if o.Workspace == nil || dir == "" {
		return nil, nil
	}
	ws, err := o.Workspace(dir)
	if err != nil || ws == nil {
		return nil, err
	}
	if ws.Server == "" {
		return nil, fmt.Errorf("%s is the workspace of vault %s, and it is down: a command would not see the files written there. Bring it up with `avfs workspace up %s`",
			ws.Dir, ws.Vault, Quote(ws.Dir))
	}
	return ws, nil
}

// serverAt is the serve socket rewrites of commands in dir name: the
// workspace's, else o.Server.
func serverAt(o Options, dir string) string {
	if ws, err := workspaceOf(o, dir); err == nil && ws != nil {
		return ws.Server
	}
	return o.Server
}

// projectOf is o.Project, else cwd.
func projectOf(o Options, cwd string) string {
	if o.Project != "" {
		return o.Project
	}
	return cwd
}

// Quote quotes s for a POSIX shell: one single-quoted word.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Rewrite is the shell command that runs c through `avfs proxy exec`
// in vault, printing the envelope (--json); approvalID, when not "",
// runs it under that approval; c.Server, when not "", through that avfs
// serve (--server).
func Rewrite(exe, vault string, c Command, approvalID string) string {
	parts := []string{Quote(exe), "--vault", Quote(vault), "--json", "proxy", "exec"}
	if c.Server != "" {
		parts = append(parts, "--server", Quote(c.Server))
	}
	parts = append(parts, "--cwd", Quote(c.Cwd))
	if c.Timeout > 0 {
		parts = append(parts, "--timeout", c.Timeout.String())
	}
	if approvalID != "" {
		parts = append(parts, "--approval", Quote(approvalID))
	}
	parts = append(parts, "--shell", Quote(c.Script))
	return strings.Join(parts, " ")
}

// ruleIDs lists the reasons' rule ids, comma separated.
func ruleIDs(rs []wire.Reason) string {
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	if len(ids) == 0 {
		return "no rule"
	}
	return strings.Join(ids, ", ")
}

// denyReason is the reason given for a deny.
func denyReason(v Verdict) string {
	msgs := make([]string, 0, len(v.Reasons))
	for _, r := range v.Reasons {
		if r.Decision == wire.Deny {
			msgs = append(msgs, r.Message)
		}
	}
	s := "avfs policy denied this command (rules: " + ruleIDs(v.Reasons) + ")"
	if len(msgs) > 0 {
		s += ": " + strings.Join(msgs, "; ")
	}
	return s
}

// pendingReason tells how a pending approval is granted.
func pendingReason(v Verdict) string {
	id := v.Approval.ID
	return fmt.Sprintf("avfs policy requires approval for this command (rules: %s): pending approval %s. "+
		"A person grants it with `avfs --vault %s approval grant %s` (or refuses with `avfs approval deny %s`); "+
		"then run the same command again and it runs with --approval %s.", ruleIDs(v.Reasons), id, Quote(v.Vault), id, id, id)
}

// plan is the adapters' common reading of a verdict for a shell command.
type plan struct {
	kind    planKind
	command string // the rewrite, for allow and ask
	reason  string
}

type planKind int

const (
	planAllow   planKind = iota // run the rewrite
	planDeny                    // never run
	planPending                 // waits for a person: ask, defer or deny per harness
)

// decideShell decides c and plans the answer.
func decideShell(ctx context.Context, d Decider, o Options, c Command) (plan, error) {
	v, err := d.Decide(ctx, c)
	if err != nil {
		return plan{}, err
	}
	if c.Server == "" {
		c.Server = o.Server
	}
	if v.Vault == "" {
		return plan{}, errors.New("the decider named no vault")
	}
	switch v.Decision {
	case wire.Allow, wire.AllowWithCheckpoint:
		return plan{kind: planAllow, command: Rewrite(o.Exe, v.Vault, c, ""),
			reason: fmt.Sprintf("avfs: %s (rules: %s); runs through avfs proxy exec in vault %s", v.Decision, ruleIDs(v.Reasons), v.Vault)}, nil
	case wire.Deny:
		return plan{kind: planDeny, reason: denyReason(v)}, nil
	case wire.RequireApproval:
		if v.Approval == nil || v.Approval.ID == "" {
			return plan{}, errors.New("require_approval without an approval")
		}
		if v.Approval.Status == "granted" {
			return plan{kind: planAllow, command: Rewrite(o.Exe, v.Vault, c, v.Approval.ID),
				reason: fmt.Sprintf("avfs: approval %s was granted; runs through avfs proxy exec in vault %s", v.Approval.ID, v.Vault)}, nil
		}
		return plan{kind: planPending, command: Rewrite(o.Exe, v.Vault, c, v.Approval.ID), reason: pendingReason(v)}, nil
	}
	return plan{}, fmt.Errorf("unknown decision %q", v.Decision)
}
