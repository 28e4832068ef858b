package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// GeminiInput is the payload of a Gemini CLI BeforeTool hook. ToolInput
// is read as GeminiShellInput for run_shell_command only.
type GeminiInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path,omitempty"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	Timestamp      string          `json:"timestamp"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
}

// GeminiShellInput is the input of run_shell_command, and the tool_input
// an allow merges into it.
type GeminiShellInput struct {
	Command     string `json:"command"`
	Description string `json:"description,omitempty"`
	Directory   string `json:"directory,omitempty"` // relative to cwd, or absolute
}

// GeminiDecision is a BeforeTool decision.
type GeminiDecision string

// Gemini CLI's decisions (it has no "ask").
const (
	GeminiAllow GeminiDecision = "allow" // run, with tool_input merged in
	GeminiDeny  GeminiDecision = "deny"  // do not run; the reason goes to the model
)

// GeminiOutput is the JSON a Gemini CLI BeforeTool hook prints (exit 0).
type GeminiOutput struct {
	Decision           GeminiDecision      `json:"decision"`
	Reason             string              `json:"reason,omitempty"`
	HookSpecificOutput *GeminiHookSpecific `json:"hookSpecificOutput,omitempty"`
}

// GeminiHookSpecific carries the tool_input merged into the call's.
type GeminiHookSpecific struct {
	ToolInput GeminiShellInput `json:"tool_input"`
}

const (
	geminiBefore = "BeforeTool"
	geminiShell  = "run_shell_command"
)

// blockGemini is exit 2 with the reason on stderr, which blocks the tool.
func blockGemini(reason string) Answer { return Answer{Stderr: reason + "\n", Exit: 2} }

func handleGemini(ctx context.Context, d Decider, o Options, payload []byte) (Answer, error) {
	var in GeminiInput
	if err := decodeStrict(payload, &in); err != nil {
		return Answer{}, err
	}
	switch {
	case in.HookEventName == "":
		return Answer{}, errors.New("the hook payload has no hook_event_name")
	case in.HookEventName != geminiBefore || in.ToolName != geminiShell:
		return Answer{}, nil // no rules for other tools or events: no opinion
	}
	var sh GeminiShellInput
	if err := decodeStrict(in.ToolInput, &sh); err != nil {
		return Answer{}, fmt.Errorf("tool_input: %w", err)
	}
	if strings.TrimSpace(sh.Command) == "" {
		return Answer{}, errors.New("tool_input has no command")
	}
	dir := in.Cwd
	if sh.Directory != "" {
		if filepath.IsAbs(sh.Directory) {
			dir = sh.Directory
		} else {
			dir = filepath.Join(in.Cwd, sh.Directory)
		}
	}
	c, err := shellCommand(o, sh.Command, in.Cwd, dir)
	if err != nil {
		return Answer{}, err
	}
	p, err := decideShell(ctx, d, o, c)
	if err != nil {
		return Answer{}, err
	}
	out := GeminiOutput{Reason: p.reason}
	switch p.kind {
	case planAllow:
		out.Decision = GeminiAllow
		merged := sh
		merged.Command = p.command
		out.HookSpecificOutput = &GeminiHookSpecific{ToolInput: merged}
	case planDeny, planPending:
		out.Decision = GeminiDeny
	default:
		return Answer{}, fmt.Errorf("unknown plan %d", p.kind)
	}
	b, err := marshal(out)
	return Answer{Stdout: b}, err
}
