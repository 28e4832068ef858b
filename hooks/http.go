package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// A hook that comes over HTTP (Claude Code's "type": "http" hooks, or
// curl glue posting a payload to avfs serve's POST /v1/hooks/HARNESS)
// cannot exit 2: Claude Code reads a non-2xx status, a connection failure
// and a timeout as a non-blocking error and lets the call go on. So the
// HTTP answer of a hook is always a 2xx body, and a blocking answer is
// the harness's JSON form of it (see HTTPBody).

// sniffLimit bounds what BlockHTTP reads of a body it will not answer.
const sniffLimit = 64 << 10

// RunHTTP is Run for a hook payload that came as an HTTP request body:
// the document to answer with status 200. It never fails, as Run: what
// Run answers with exit 0 is its stdout, byte for byte ("" for no
// opinion); a blocking answer (exit 2 and stderr) is the harness's JSON
// deny carrying the same reason (see HTTPBody). Like Run it returns by
// o.Timeout even while body or d still hang.
func RunHTTP(ctx context.Context, h Harness, d Decider, o Options, body io.Reader) []byte {
	limit := o.MaxInput
	if limit <= 0 {
		limit = DefaultMaxInput
	}
	c := &capture{limit: int(min(limit, sniffLimit))}
	a := Run(ctx, h, d, o, io.TeeReader(body, c))
	return HTTPBody(h, c.bytes(), a)
}

// BlockHTTP is h's blocking HTTP answer with reason, for a request avfs
// will not decide (a wrong bearer token, an unknown parameter). It reads
// at most 64 KiB of body, only to answer in the form of the payload's
// event.
func BlockHTTP(h Harness, body io.Reader, reason string) []byte {
	var head []byte
	if body != nil {
		head, _ = io.ReadAll(io.LimitReader(body, sniffLimit))
	}
	return HTTPBody(h, head, Block(h, reason))
}

// HTTPBody is a as the body of a 2xx answer to the HTTP hook whose
// payload is payload (all of it, or its beginning): a.Stdout when a exits
// 0; else a's blocking answer as h's JSON, with a.Stderr as the reason:
//
//   - Claude Code: a PermissionRequest gets decision.behavior "deny" (the
//     message goes to Claude); a PostToolUse, decision "block" (the tool
//     already ran: the reason goes to Claude, as exit 2 does); any other
//     event, and a payload whose event cannot be read, the PreToolUse
//     permissionDecision "deny";
//   - Gemini CLI: decision "deny" with the reason;
//   - Codex's blocking answer is JSON already (exit 0).
//
// An unknown harness, which has no JSON form, gets "" (no opinion): the
// server never routes one here.
func HTTPBody(h Harness, payload []byte, a Answer) []byte {
	if a.Exit == 0 {
		return a.Stdout
	}
	reason := strings.TrimSpace(a.Stderr)
	var v any
	switch h {
	case ClaudeCode:
		switch eventOf(payload) {
		case claudePermission:
			v = ClaudePermissionOutput{HookSpecificOutput: ClaudePermissionHookOutput{HookEventName: claudePermission,
				Decision: ClaudePermissionDecision{Behavior: ClaudeBehaviorDeny, Message: reason}}}
		case claudePost:
			v = ClaudeBlock{Decision: "block", Reason: reason}
		default:
			v = ClaudeOutput{HookSpecificOutput: ClaudeHookOutput{HookEventName: claudePre, PermissionDecision: ClaudeDeny, PermissionDecisionReason: reason}}
		}
	case Gemini:
		v = GeminiOutput{Decision: GeminiDeny, Reason: reason}
	case Codex:
		return a.Stdout
	default:
		return nil
	}
	b, err := marshal(v)
	if err != nil { // cannot happen: structs of strings
		panic(err)
	}
	return b
}

// ClaudeBlock is Claude Code's top-level decision of a PostToolUse hook:
// "block" gives Claude the reason (the tool already ran).
type ClaudeBlock struct {
	Decision string `json:"decision"` // "block"
	Reason   string `json:"reason"`
}

// eventOf is the hook_event_name of a payload, "" when it has none or
// cannot be read (a truncated payload is read as far as it goes).
func eventOf(payload []byte) string {
	var in struct {
		HookEventName string `json:"hook_event_name"`
	}
	if json.Unmarshal(payload, &in) == nil {
		return in.HookEventName
	}
	// A payload cut at the sniff limit: look for the field among the
	// top-level tokens read before the cut.
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ""
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return ""
		}
		if k == "hook_event_name" {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return ""
			}
			return s
		}
	}
	return ""
}

// capture keeps the first limit bytes written to it; safe for the
// concurrent use of Run's reader goroutine and RunHTTP.
type capture struct {
	mu    sync.Mutex
	b     []byte
	limit int
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capture) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.b)
}
