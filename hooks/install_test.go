package hooks

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/wire"
)

const installCmd = "/usr/local/bin/avfs hook claude-code"

func TestInstallFreshAndIdempotent(t *testing.T) {
	for _, h := range Harnesses {
		t.Run(string(h), func(t *testing.T) {
			dir := t.TempDir()
			path, err := SettingsPath(h, dir)
			if err != nil {
				t.Fatal(err)
			}
			cmd := "/usr/local/bin/avfs hook " + string(h)
			res, err := Install(h, path, cmd, false)
			if err != nil || !res.Changed {
				t.Fatalf("%+v %v", res, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("install", string(h)+".json"), Answer{Stdout: b})
			// A second install changes nothing and writes nothing.
			fi, _ := os.Stat(path)
			res, err = Install(h, path, cmd, false)
			if err != nil || res.Changed {
				t.Fatalf("second install: %+v %v", res, err)
			}
			fi2, _ := os.Stat(path)
			if !fi.ModTime().Equal(fi2.ModTime()) {
				t.Error("the second install rewrote the file")
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*avfs-*")); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

func TestInstallMerge(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := `{
  "model": "opus",
  "permissions": {"allow": ["Bash(git status)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --check", "timeout": 30}]}
    ],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}`
	if err := os.WriteFile(path, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Install(ClaudeCode, path, installCmd, false)
	if err != nil || !res.Changed {
		t.Fatalf("%+v %v", res, err)
	}
	b, _ := os.ReadFile(path)
	golden(t, "install/claude-code-merged.json", Answer{Stdout: b})
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the file's own 0600", fi.Mode().Perm())
	}
	// Another avfs binary: the hook's command is replaced in place, not added.
	res, err = Install(ClaudeCode, path, "/opt/avfs/bin/avfs hook claude-code --headless", false)
	if err != nil || !res.Changed {
		t.Fatalf("%+v %v", res, err)
	}
	b, _ = os.ReadFile(path)
	if strings.Count(string(b), "hook claude-code") != 3 || strings.Contains(string(b), installCmd) {
		t.Errorf("replace:\n%s", b)
	}
}

func TestInstallDryRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".gemini", "settings.json")
	res, err := Install(Gemini, path, "avfs hook gemini", true)
	if err != nil || !res.Changed || !res.DryRun {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote %s (%v)", path, err)
	}
	var doc struct {
		Hooks map[string][]HookGroup `json:"hooks"`
	}
	if err := json.Unmarshal(res.Settings, &doc); err != nil || len(doc.Hooks["BeforeTool"]) != 1 {
		t.Errorf("settings %s: %v", res.Settings, err)
	}
}

func TestInstallRefusesInvalidJSON(t *testing.T) {
	for _, content := range []string{"{not json", "[1,2]", `{"hooks": []}`, `{"hooks": {"PreToolUse": {}}}`, "{} {}"} {
		path := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Install(ClaudeCode, path, installCmd, false)
		if !wire.HasCode(err, wire.CodeInvalidInput) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v", content, err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("%q was overwritten: %q", content, b)
		}
	}
}

func TestIsOurs(t *testing.T) {
	for cmd, want := range map[string]bool{
		"avfs hook claude-code":                     true,
		"/usr/bin/avfs hook claude-code --headless": true,
		"'/a b/avfs' --vault x hook claude-code":    false, // quoted path with a space: not recognised, so added again
		"avfs hook codex":                           false,
		"myavfs hook claude-code":                   false,
		"avfs hook":                                 false,
	} {
		if got := isOurs(ClaudeCode, cmd); got != want {
			t.Errorf("isOurs(%q) = %v", cmd, got)
		}
	}
}

// TestInstallResultGolden pins the --json document of `avfs hook install`.
func TestInstallResultGolden(t *testing.T) {
	res := InstallResult{Harness: Codex, Path: "/home/u/proj/.codex/hooks.json", Changed: true, DryRun: true,
		Settings: json.RawMessage(`{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"/usr/local/bin/avfs hook codex"}]}]}}`)}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "install/result.json", Answer{Stdout: append(b, '\n')})
}

// TestInstallHTTP: Claude Code's HTTP hook is installed once per event,
// takes the place of avfs's command hook (and gives it back), and a
// second install changes nothing.
func TestInstallHTTP(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".claude", "settings.json")
	if _, err := Install(ClaudeCode, path, installCmd, false); err != nil {
		t.Fatal(err)
	}
	hook, err := HTTPHook("http://127.0.0.1:8181", "AVFS_TOKEN", url.Values{"vault": {"hooked"}, "project": {"/home/u/proj"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := InstallHook(ClaudeCode, path, hook, false)
	if err != nil || !res.Changed {
		t.Fatalf("%+v %v", res, err)
	}
	b, _ := os.ReadFile(path)
	golden(t, "install/claude-code-http.json", Answer{Stdout: b})
	if strings.Contains(string(b), installCmd) || strings.Count(string(b), `"type": "http"`) != 3 {
		t.Errorf("the command hook was not replaced:\n%s", b)
	}
	if res, err := InstallHook(ClaudeCode, path, hook, false); err != nil || res.Changed {
		t.Fatalf("second install: %+v %v", res, err)
	}
	// Another token variable is another hook: replaced in place.
	other, _ := HTTPHook("http://127.0.0.1:8181/v1/hooks/claude-code", "MY_TOKEN", nil)
	if res, err := InstallHook(ClaudeCode, path, other, false); err != nil || !res.Changed {
		t.Fatalf("other token: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), `"type": "http"`) != 3 || strings.Contains(string(b), "AVFS_TOKEN") {
		t.Errorf("other token:\n%s", b)
	}
	// And back to the command hook.
	if res, err := Install(ClaudeCode, path, installCmd, false); err != nil || !res.Changed {
		t.Fatalf("back: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), installCmd) != 3 || strings.Contains(string(b), `"http"`) {
		t.Errorf("back:\n%s", b)
	}
	if _, err := HTTPHook("http://127.0.0.1:8181", "$X", nil); !wire.HasCode(err, wire.CodeUsage) {
		t.Errorf("a token variable that is no name: %v", err)
	}
	if _, err := InstallHook(Codex, filepath.Join(t.TempDir(), "hooks.json"), hook, false); !wire.HasCode(err, wire.CodeUsage) {
		t.Errorf("codex with an HTTP hook: %v", err)
	}
}

func TestHTTPHookURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:8181":                              "http://127.0.0.1:8181/v1/hooks/claude-code?vault=v",
		"https://avfs.internal/":                             "https://avfs.internal/v1/hooks/claude-code?vault=v",
		"http://127.0.0.1:8181/v1/hooks/claude-code?vault=w": "http://127.0.0.1:8181/v1/hooks/claude-code?vault=w",
		"http://127.0.0.1:8181/v1/exec":                      "",
		"unix:/run/avfs.sock":                                "",
		"127.0.0.1:8181":                                     "",
	} {
		h, err := HTTPHook(raw, "AVFS_TOKEN", url.Values{"vault": {"v"}})
		if want == "" {
			if !wire.HasCode(err, wire.CodeUsage) {
				t.Errorf("%q: %+v %v", raw, h, err)
			}
			continue
		}
		if err != nil || h.URL != want || h.Headers["Authorization"] != "Bearer $AVFS_TOKEN" || !slices.Equal(h.AllowedEnvVars, []string{"AVFS_TOKEN"}) {
			t.Errorf("%q: %+v %v", raw, h, err)
		}
	}
}
