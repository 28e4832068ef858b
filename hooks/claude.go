package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"avfs/wire"
)

// ClaudeInput is the payload of a Claude Code hook (PreToolUse,
// PostToolUse, PermissionRequest). ToolInput and ToolResponse depend on
// the tool: they are read as ClaudeBashInput and ClaudeBashResponse for
// Bash only.
type ClaudeInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode,omitempty"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolResponse   json.RawMessage `json:"tool_response,omitempty"` // PostToolUse
	ToolUseID      string          `json:"tool_use_id,omitempty"`
}

// ClaudeBashInput is the input of Claude Code's Bash tool, and the
// updatedInput that replaces it whole.
type ClaudeBashInput struct {
	Command         string `json:"command"`
	Description     string `json:"description,omitempty"`
	Timeout         *int64 `json:"timeout,omitempty"` // milliseconds
	RunInBackground *bool  `json:"run_in_background,omitempty"`
}

// ClaudeBashResponse is the tool_response of Bash in PostToolUse.
type ClaudeBashResponse struct {
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	Interrupted bool   `json:"interrupted"`
	IsImage     bool   `json:"isImage"`
}

// ClaudePermission is a PreToolUse permissionDecision.
type ClaudePermission string

// Claude Code's permission decisions.
const (
	ClaudeAllow ClaudePermission = "allow" // run the (rewritten) tool call without asking
	ClaudeDeny  ClaudePermission = "deny"  // do not run it; the reason is shown to the model
	ClaudeAsk   ClaudePermission = "ask"   // ask the user, showing the reason
	ClaudeDefer ClaudePermission = "defer" // headless: stop the call for a person to resume later
)

// ClaudeOutput is the JSON a Claude Code hook prints (exit 0).
type ClaudeOutput struct {
	HookSpecificOutput ClaudeHookOutput `json:"hookSpecificOutput"`
}

// ClaudeHookOutput is the hookSpecificOutput of ClaudeOutput.
type ClaudeHookOutput struct {
	HookEventName            string           `json:"hookEventName"`
	PermissionDecision       ClaudePermission `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string           `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             *ClaudeBashInput `json:"updatedInput,omitempty"`
	AdditionalContext        string           `json:"additionalContext,omitempty"`
}

// ClaudePermissionOutput is the JSON a Claude Code PermissionRequest
// hook prints (exit 0); no output leaves the dialog to the person.
type ClaudePermissionOutput struct {
	HookSpecificOutput ClaudePermissionHookOutput `json:"hookSpecificOutput"`
}

// ClaudePermissionHookOutput is the hookSpecificOutput of
// ClaudePermissionOutput.
type ClaudePermissionHookOutput struct {
	HookEventName string                   `json:"hookEventName"`
	Decision      ClaudePermissionDecision `json:"decision"`
}

// ClaudeBehavior is a PermissionRequest decision's behavior.
type ClaudeBehavior string

// Claude Code's PermissionRequest behaviors.
const (
	ClaudeBehaviorAllow ClaudeBehavior = "allow" // approve; the dialog is not shown
	ClaudeBehaviorDeny  ClaudeBehavior = "deny"  // refuse; the message goes to Claude
)

// ClaudePermissionDecision is a PermissionRequest decision.
type ClaudePermissionDecision struct {
	Behavior ClaudeBehavior `json:"behavior"`
	Message  string         `json:"message,omitempty"`
}

// Claude Code's hook events that avfs answers, and its shell tool.
const (
	claudePre        = "PreToolUse"
	claudePost       = "PostToolUse"
	claudePermission = "PermissionRequest"
	claudeBash       = "Bash"
)

// blockClaude is exit 2 with the reason on stderr: it blocks a PreToolUse
// (and a PermissionRequest) whatever the JSON would have said.
func blockClaude(reason string) Answer { return Answer{Stderr: reason + "\n", Exit: 2} }

func handleClaude(ctx context.Context, d Decider, o Options, payload []byte) (Answer, error) {
	var in ClaudeInput
	if err := decodeStrict(payload, &in); err != nil {
		return Answer{}, err
	}
	switch {
	case in.HookEventName == "":
		return Answer{}, errors.New("the hook payload has no hook_event_name")
	case in.ToolName != claudeBash:
		return Answer{}, nil // no rules for other tools: no opinion
	case in.HookEventName == claudePost:
		return claudePostAnswer(in)
	case in.HookEventName != claudePre && in.HookEventName != claudePermission:
		return Answer{}, nil // other events: no opinion
	}
	var bash ClaudeBashInput
	if err := decodeStrict(in.ToolInput, &bash); err != nil {
		return Answer{}, fmt.Errorf("tool_input: %w", err)
	}
	if strings.TrimSpace(bash.Command) == "" {
		return Answer{}, errors.New("tool_input has no command")
	}
	if in.HookEventName == claudePermission {
		return claudePermissionAnswer(ctx, d, o, in, bash)
	}
	c, err := shellCommand(o, bash.Command, in.Cwd, in.Cwd)
	if err != nil {
		return Answer{}, err
	}
	if bash.Timeout != nil && *bash.Timeout > 0 {
		c.Timeout = time.Duration(*bash.Timeout) * time.Millisecond
	}
	p, err := decideShell(ctx, d, o, c)
	if err != nil {
		return Answer{}, err
	}
	out := ClaudeHookOutput{HookEventName: claudePre, PermissionDecisionReason: p.reason}
	switch p.kind {
	case planAllow:
		out.PermissionDecision = ClaudeAllow
	case planDeny:
		out.PermissionDecision = ClaudeDeny
	case planPending:
		out.PermissionDecision = ClaudeAsk
		if o.Headless {
			out.PermissionDecision = ClaudeDefer
		}
	}
	if p.kind != planDeny {
		rewritten := bash
		rewritten.Command = p.command
		out.UpdatedInput = &rewritten
	}
	b, err := marshal(ClaudeOutput{HookSpecificOutput: out})
	return Answer{Stdout: b}, err
}

// claudePostAnswer adds what avfs did to the model's context when the
// Bash tool's stdout is an avfs envelope; anything else gets no answer.
func claudePostAnswer(in ClaudeInput) (Answer, error) {
	env, ok := envelopeOf(in.ToolResponse)
	if !ok {
		return Answer{}, nil
	}
	text := envelopeContext(env)
	if text == "" {
		return Answer{}, nil
	}
	b, err := marshal(ClaudeOutput{HookSpecificOutput: ClaudeHookOutput{HookEventName: claudePost, AdditionalContext: text}})
	return Answer{Stdout: b}, err
}

// envelopeOf finds the avfs envelope in a Bash tool_response: its stdout
// (or the response itself, when it is a string) holding exactly one
// proxy exec envelope. Anything else is not one.
func envelopeOf(resp json.RawMessage) (*wire.Envelope, bool) {
	var text string
	var r ClaudeBashResponse
	if err := json.Unmarshal(resp, &r); err == nil {
		text = r.Stdout
	} else if err := json.Unmarshal(resp, &text); err != nil {
		return nil, false
	}
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "{") {
		return nil, false
	}
	var env wire.Envelope
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	if err := dec.Decode(&env); err != nil || dec.More() {
		return nil, false
	}
	if env.Kind != wire.EnvelopeKind || env.SchemaVersion != wire.EnvelopeSchemaVersion || env.ID == "" {
		return nil, false
	}
	return &env, true
}

// maxContextChanges is how many changed paths the context lists.
const maxContextChanges = 20

// envelopeContext is the additionalContext of a run: its checkpoint, its
// changes and the command that undoes them; "" when there is nothing to
// say (nothing changed and no checkpoint).
func envelopeContext(env *wire.Envelope) string {
	if env.Checkpoint == nil && env.ChangesTotal == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "avfs ran this command as %s in vault %s (decision %s", env.ID, env.Vault, env.Decision)
	if env.Process != nil {
		fmt.Fprintf(&b, ", exit %d", env.Process.ExitCode)
	}
	b.WriteString(").")
	if env.Checkpoint != nil {
		fmt.Fprintf(&b, " Checkpoint %d (%s) was taken before it.", env.Checkpoint.ID, env.Checkpoint.Name)
	}
	if env.ChangesTotal == 0 {
		b.WriteString(" It changed no files.")
	} else {
		fmt.Fprintf(&b, " Changed files (%d):", env.ChangesTotal)
		for i, c := range env.Changes {
			if i == maxContextChanges {
				break
			}
			fmt.Fprintf(&b, " %s (%s)", c.Path, c.Op)
			if i < len(env.Changes)-1 && i < maxContextChanges-1 {
				b.WriteString(",")
			}
		}
		if listed := min(len(env.Changes), maxContextChanges); env.ChangesTotal > listed {
			fmt.Fprintf(&b, " and %d more", env.ChangesTotal-listed)
		}
		b.WriteString(".")
	}
	if env.Checkpoint != nil {
		fmt.Fprintf(&b, " Undo with: avfs --vault %s checkpoint restore %d", Quote(env.Vault), env.Checkpoint.ID)
	}
	return b.String()
}

// claudePermissionAnswer answers the permission dialog Claude Code is
// about to show for a Bash call:
//
//   - avfs's own rewrite (exactly: see ParseRewrite) carrying --approval
//     is allowed once that approval is granted, and left to the person
//     while it is pending (they grant it, then accept); a rewrite without
//     one is left to the person too (their own ask rules showed the
//     dialog, and avfs does not overrule them);
//   - any other command is decided: deny, and a pending approval, refuse
//     it with the reason; allow and a granted approval leave the dialog
//     to the person (avfs never approves a command that would run outside
//     it).
//
// An error while deciding is a deny.
func claudePermissionAnswer(ctx context.Context, d Decider, o Options, in ClaudeInput, bash ClaudeBashInput) (Answer, error) {
	answer := func(b ClaudeBehavior, msg string) (Answer, error) {
		out, err := marshal(ClaudePermissionOutput{HookSpecificOutput: ClaudePermissionHookOutput{HookEventName: claudePermission,
			Decision: ClaudePermissionDecision{Behavior: b, Message: msg}}})
		return Answer{Stdout: out}, err
	}
	failed := func(err error) (Answer, error) {
		return answer(ClaudeBehaviorDeny, fmt.Sprintf("avfs hook failed: %v; the command is blocked", err))
	}
	if vault, c, approval, ok := ParseRewrite(o.Exe, serverAt(o, in.Cwd), bash.Command); ok {
		if approval == "" {
			return Answer{}, nil
		}
		v, err := d.Decide(ctx, c)
		if err != nil {
			return failed(err)
		}
		if v.Vault == vault && v.Decision == wire.RequireApproval && v.Approval != nil && v.Approval.ID == approval && v.Approval.Status == "granted" {
			return answer(ClaudeBehaviorAllow, "") // an allow carries no message
		}
		return Answer{}, nil
	}
	c, err := shellCommand(o, bash.Command, in.Cwd, in.Cwd)
	if err != nil {
		return failed(err)
	}
	p, err := decideShell(ctx, d, o, c)
	if err != nil {
		return failed(err)
	}
	if p.kind == planAllow {
		return Answer{}, nil
	}
	return answer(ClaudeBehaviorDeny, p.reason)
}
