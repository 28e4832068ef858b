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

const codexPre = "PreToolUse"

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
	case in.HookEventName != codexPre || in.ToolName != "Bash":
		return Answer{}, nil // no rules for other tools or events: no opinion
	case strings.TrimSpace(in.ToolInput.Command) == "":
		return Answer{}, errors.New("tool_input has no command")
	}
	c := Command{Script: in.ToolInput.Command, Cwd: vaultCwd(projectOf(o, in.Cwd), in.Cwd)}
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
