package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRunHTTPSameAnswer: every answer Run gives with exit 0 is RunHTTP's
// body byte for byte, for every harness and verdict.
func TestRunHTTPSameAnswer(t *testing.T) {
	cases := []struct {
		h       Harness
		payload string
	}{
		{ClaudeCode, "pre_bash.json"},
		{ClaudeCode, "permission_request.json"},
		{ClaudeCode, "post_bash_envelope.json"},
		{ClaudeCode, "pre_edit.json"},
		{Codex, "pre_bash.json"},
		{Codex, "permission_request.json"},
		{Gemini, "before_shell.json"},
		{Gemini, "before_write_file.json"},
	}
	for _, c := range cases {
		for name, v := range verdicts {
			payload := readPayload(t, c.h, c.payload)
			a := Run(context.Background(), c.h, &fakeDecider{verdict: v}, testOptions, bytes.NewReader(payload))
			if a.Exit != 0 {
				t.Fatalf("%s %s %s: exit %d", c.h, c.payload, name, a.Exit)
			}
			got := RunHTTP(context.Background(), c.h, &fakeDecider{verdict: v}, testOptions, bytes.NewReader(payload))
			if !bytes.Equal(got, a.Stdout) {
				t.Errorf("%s %s %s:\nhttp %s\nrun  %s", c.h, c.payload, name, got, a.Stdout)
			}
		}
	}
}

// TestHTTPBlock: a blocking answer (exit 2 for a command hook) is the
// harness's JSON deny in the form of the payload's event, with Run's
// reason.
func TestHTTPBlock(t *testing.T) {
	broken := &fakeDecider{err: errors.New("load policy: broken.rego:3: rego_parse_error")}
	cases := []struct {
		name    string
		h       Harness
		d       *fakeDecider
		payload []byte
		max     int64
	}{
		{"pre_decider_error", ClaudeCode, broken, readPayload(t, ClaudeCode, "pre_bash.json"), 0},
		{"permission_no_command", ClaudeCode, broken, []byte(`{"hook_event_name":"PermissionRequest","tool_name":"Bash","cwd":"/p","tool_input":{}}`), 0},
		{"post_garbage_tool_input", ClaudeCode, broken, []byte(`{"hook_event_name":"PostToolUse","tool_name":"Bash","cwd":"/p","tool_input":{}} x`), 0},
		{"garbage", ClaudeCode, broken, []byte("this is not json"), 0},
		{"oversized_permission", ClaudeCode, broken, []byte(`{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"` + strings.Repeat("x", 4096) + `"}}`), 1024},
		{"gemini_decider_error", Gemini, broken, readPayload(t, Gemini, "before_shell.json"), 0},
		{"gemini_garbage", Gemini, broken, []byte("{"), 0},
		{"codex_decider_error", Codex, broken, readPayload(t, Codex, "pre_bash.json"), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions
			o.MaxInput = c.max
			a := Run(context.Background(), c.h, c.d, o, bytes.NewReader(c.payload))
			body := RunHTTP(context.Background(), c.h, c.d, o, bytes.NewReader(c.payload))
			golden(t, filepath.Join("http", c.name+".out"), Answer{Stdout: body})
			if !json.Valid(body) {
				t.Fatalf("not JSON: %s", body)
			}
			if reason := strings.TrimSpace(a.Stderr); reason == "" || !bytes.Contains(body, []byte(strings.ReplaceAll(reason, `"`, `\"`))) {
				t.Errorf("the body lacks Run's reason %q: %s", reason, body)
			}
		})
	}
}

// TestEventOf reads the event of whole and cut payloads.
func TestEventOf(t *testing.T) {
	for payload, want := range map[string]string{
		`{"hook_event_name":"PermissionRequest"}`:                    "PermissionRequest",
		`{"session_id":"s","hook_event_name":"PostToolUse","tool_in`: "PostToolUse",
		`{"tool_input":{"command":"xxxxxxxx`:                         "",
		`not json`:                                                   "",
		`{"hook_event_name":7}`:                                      "",
		``:                                                           "",
		`{"tool_input":{"hook_event_name":"PermissionRequest"},"a":1`: "",
	} {
		if got := eventOf([]byte(payload)); got != want {
			t.Errorf("%q: %q, want %q", payload, got, want)
		}
	}
}

func TestBlockHTTP(t *testing.T) {
	body := BlockHTTP(ClaudeCode, strings.NewReader(`{"hook_event_name":"PermissionRequest"}`), "avfs serve: missing or wrong bearer token; the command is blocked")
	golden(t, "http/bad_token_permission.out", Answer{Stdout: body})
	if b := BlockHTTP(Gemini, nil, "no"); string(b) != `{"decision":"deny","reason":"no"}`+"\n" {
		t.Errorf("gemini: %s", b)
	}
}

// TestHookOpenAPI checks that docs/serve.openapi.json names every field of
// the hook answers, and no other.
func TestHookOpenAPI(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "serve.openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for schema, v := range map[string]any{
		"ClaudeOutput": ClaudeOutput{}, "ClaudeHookOutput": ClaudeHookOutput{}, "ClaudePermissionOutput": ClaudePermissionOutput{},
		"ClaudePermissionHookOutput": ClaudePermissionHookOutput{}, "ClaudePermissionDecision": ClaudePermissionDecision{}, "ClaudeBlock": ClaudeBlock{},
		"CodexOutput": CodexOutput{}, "CodexHookOutput": CodexHookOutput{}, "CodexPermissionOutput": CodexPermissionOutput{},
		"CodexPermissionHookOutput": CodexPermissionHookOutput{}, "CodexPermissionDecision": CodexPermissionDecision{},
		"GeminiOutput": GeminiOutput{}, "GeminiHookSpecific": GeminiHookSpecific{},
	} {
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		var documented []string
		for k := range doc.Components.Schemas[schema].Properties {
			documented = append(documented, k)
		}
		slices.Sort(fields)
		slices.Sort(documented)
		if !slices.Equal(fields, documented) {
			t.Errorf("%s: the type has %v, docs/serve.openapi.json %v", schema, fields, documented)
		}
	}
}
