package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// CodexInput is the payload of a Codex PreToolUse hook. tool_name is
// "Bash" for every shell tool.
type CodexInput struct {
	SessionID      string         `json:"session_id"`
	TranscriptPath string         `json:"transcript_path,omitempty"`
	Cwd            string         `json:"cwd"`
	HookEventName  string         `json:"hook_event_name"`
	Model          string         `json:"model,omitempty"`
	PermissionMode string         `json:"permission_mode,omitempty"`
	ToolName       string         `json:"tool_name"`
	ToolInput      CodexToolInput `json:"tool_input"`
	ToolUseID      string         `json:"tool_use_id,omitempty"`
}

// CodexToolInput is the input of Codex's shell tool, and its updatedInput.
type CodexToolInput struct {
	Command string `json:"command"`
}

// CodexPermission is a Codex PreToolUse permissionDecision: only these
// two are valid (anything else is a failed hook, and the call proceeds).
type CodexPermission string

// Codex's permission decisions.
const (
	CodexAllow CodexPermission = "allow" // run updatedInput
	CodexDeny  CodexPermission = "deny"  // do not run; the reason (never empty) goes to the model
)

// CodexOutput is the JSON a Codex PreToolUse hook prints (exit 0).
type CodexOutput struct {
	HookSpecificOutput CodexHookOutput `json:"hookSpecificOutput"`
}

// CodexHookOutput is the hookSpecificOutput of CodexOutput.
type CodexHookOutput struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       CodexPermission `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             *CodexToolInput `json:"updatedInput,omitempty"`
}

// CodexBehavior is a PermissionRequest decision's behavior.
type CodexBehavior string

// Codex's PermissionRequest behaviors.
const (
	CodexBehaviorAllow CodexBehavior = "allow" // approve without asking
	CodexBehaviorDeny  CodexBehavior = "deny"  // refuse; the message goes to the model
)

// CodexPermissionOutput is the JSON a Codex PermissionRequest hook
// prints (exit 0); no output leaves the approval to Codex.
type CodexPermissionOutput struct {
	HookSpecificOutput CodexPermissionHookOutput `json:"hookSpecificOutput"`
}

// CodexPermissionHookOutput is the hookSpecificOutput of
// CodexPermissionOutput.
type CodexPermissionHookOutput struct {
	HookEventName string                  `json:"hookEventName"`
	Decision      CodexPermissionDecision `json:"decision"`
}

// CodexPermissionDecision is a PermissionRequest decision.
type CodexPermissionDecision struct {
	Behavior CodexBehavior `json:"behavior"`
	Message  string        `json:"message,omitempty"`
}

const (
	codexPre        = "PreToolUse"
	codexPermission = "PermissionRequest"
)

// blockCodex is a deny with the reason: Codex proceeds on any other
// failure, exit 2 included in some versions, so the block is the JSON.
func blockCodex(reason string) Answer {
	b, err := marshal(CodexOutput{HookSpecificOutput: CodexHookOutput{HookEventName: codexPre, PermissionDecision: CodexDeny, PermissionDecisionReason: reason}})
	if err != nil { // cannot happen: a struct of strings
		panic(err)
	}
	return Answer{Stdout: b, Stderr: reason + "\n"}
}

func handleCodex(ctx context.Context, d Decider, o Options, payload []byte) (Answer, error) {
	var in CodexInput
	if err := decodeStrict(payload, &in); err != nil {
		return Answer{}, err
	}
	switch {
	case in.HookEventName == "":
		return Answer{}, errors.New("the hook payload has no hook_event_name")
	case in.ToolName != "Bash" || (in.HookEventName != codexPre && in.HookEventName != codexPermission):
		return Answer{}, nil // no rules for other tools or events: no opinion
	case strings.TrimSpace(in.ToolInput.Command) == "":
		return Answer{}, errors.New("tool_input has no command")
	case in.HookEventName == codexPermission:
		return codexPermissionAnswer(ctx, d, o, in)
	}
	c, err := shellCommand(o, in.ToolInput.Command, in.Cwd, in.Cwd)
	if err != nil {
		return Answer{}, err
	}
	p, err := decideShell(ctx, d, o, c)
	if err != nil {
		return Answer{}, err
	}
	out := CodexHookOutput{HookEventName: codexPre, PermissionDecisionReason: p.reason}
	switch p.kind {
	case planAllow:
		out.PermissionDecision = CodexAllow
		out.UpdatedInput = &CodexToolInput{Command: p.command}
	case planDeny, planPending:
		// No "ask": a pending approval is a deny that says how it is
		// granted (no opinion would let Codex's own approval run it
		// outside avfs).
		out.PermissionDecision = CodexDeny
	default:
		return Answer{}, fmt.Errorf("unknown plan %d", p.kind)
	}
	b, err := marshal(CodexOutput{HookSpecificOutput: out})
	return Answer{Stdout: b}, err
}

// codexPermissionAnswer answers Codex's PermissionRequest, which comes
// when Codex would ask a person to approve a shell command:
//
//   - a command PreToolUse rewrote (exactly: see ParseRewrite) is
//     allowed: proxy exec decides it again, checks its approval and holds
//     it in its sandbox;
//   - any other command is decided: deny, and a pending approval, refuse
//     it with the reason (how the approval is granted); allow and a
//     granted approval give no opinion, so Codex asks as it would — avfs
//     never approves a command that would run outside it.
//
// An error is a deny (the caller's block would be a PreToolUse answer,
// which Codex ignores here and asks the person).
func codexPermissionAnswer(ctx context.Context, d Decider, o Options, in CodexInput) (Answer, error) {
	answer := func(b CodexBehavior, msg string) (Answer, error) {
		out, err := marshal(CodexPermissionOutput{HookSpecificOutput: CodexPermissionHookOutput{HookEventName: codexPermission,
			Decision: CodexPermissionDecision{Behavior: b, Message: msg}}})
		return Answer{Stdout: out}, err
	}
	if vault, _, approval, ok := ParseRewrite(o.Exe, serverAt(o, in.Cwd), in.ToolInput.Command); ok {
		msg := "avfs: runs through avfs proxy exec in vault " + vault + ", which decides it again and holds it in its sandbox"
		if approval != "" {
			msg += " (under approval " + approval + ")"
		}
		return answer(CodexBehaviorAllow, msg)
	}
	c, err := shellCommand(o, in.ToolInput.Command, in.Cwd, in.Cwd)
	if err != nil {
		return answer(CodexBehaviorDeny, fmt.Sprintf("avfs hook failed: %v; the command is blocked", err))
	}
	p, err := decideShell(ctx, d, o, c)
	if err != nil {
		return answer(CodexBehaviorDeny, fmt.Sprintf("avfs hook failed: %v; the command is blocked", err))
	}
	if p.kind == planAllow {
		return Answer{}, nil
	}
	return answer(CodexBehaviorDeny, p.reason)
}
