package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"avfs/wire"
)

// settingsFile is where a harness reads its hooks, relative to a project
// directory or to the user's home.
var settingsFile = map[Harness]string{
	ClaudeCode: filepath.Join(".claude", "settings.json"),
	Codex:      filepath.Join(".codex", "hooks.json"),
	Gemini:     filepath.Join(".gemini", "settings.json"),
}

// hookEntry is one event's matcher group that avfs installs.
type hookEntry struct {
	event   string
	matcher string
}

var hookEntries = map[Harness][]hookEntry{
	ClaudeCode: {{claudePre, claudeBash}, {claudePost, claudeBash}, {claudePermission, claudeBash}},
	Codex:      {{codexPre, "Bash"}, {codexPermission, "Bash"}},
	Gemini:     {{geminiBefore, geminiShell}},
}

// SettingsPath is the settings file of h in dir: a project directory, or
// the user's home (the same layout).
func SettingsPath(h Harness, dir string) (string, error) {
	f, ok := settingsFile[h]
	if !ok {
		return "", wire.Errorf(wire.CodeUsage, "unknown harness %q (want claude-code, codex or gemini)", h)
	}
	return filepath.Join(dir, f), nil
}

// HookGroup is a matcher group of a settings file's hooks: the format
// Claude Code, Codex and Gemini CLI share.
type HookGroup struct {
	Matcher string        `json:"matcher"`
	Hooks   []HookCommand `json:"hooks"`
}

// HookCommand is one hook of a HookGroup: a command, or (Claude Code
// only) an HTTP hook that posts the payload to URL.
type HookCommand struct {
	Type    string `json:"type"` // "command" or "http"
	Command string `json:"command,omitempty"`
	Name    string `json:"name,omitempty"` // Gemini CLI shows it
	// URL, Headers and AllowedEnvVars are an HTTP hook's: its headers
	// may name $VAR for the variables AllowedEnvVars lists.
	URL            string            `json:"url,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	AllowedEnvVars []string          `json:"allowedEnvVars,omitempty"`
	Timeout        int               `json:"timeout,omitempty"` // seconds
}

// HTTPHook is Claude Code's HTTP hook that posts its payloads to avfs
// serve's POST /v1/hooks/claude-code at url (the daemon's address, or the
// endpoint's whole URL with its query), with the bearer token of the
// variable tokenEnv and a timeout of 30 s (longer than the endpoint's own
// deadline, so that its blocking answer comes first). It is a usage error
// for a URL that is not http(s) or names another path.
func HTTPHook(rawURL, tokenEnv string, query url.Values) (HookCommand, error) {
	if !envName.MatchString(tokenEnv) {
		return HookCommand{}, wire.Errorf(wire.CodeUsage, "hook install: %q is not an environment variable's name", tokenEnv)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return HookCommand{}, wire.Errorf(wire.CodeUsage, "hook install --http: %q is not an http:// or https:// URL", rawURL)
	}
	path := "/v1/hooks/" + string(ClaudeCode)
	switch u.Path {
	case "", "/":
		u.Path = path
	case path:
	default:
		return HookCommand{}, wire.Errorf(wire.CodeUsage, "hook install --http: give the daemon's address (http://HOST:PORT), or its %s", path)
	}
	if u.RawQuery == "" && len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return HookCommand{Type: "http", URL: u.String(), Headers: map[string]string{"Authorization": "Bearer $" + tokenEnv},
		AllowedEnvVars: []string{tokenEnv}, Timeout: 30}, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// isOursHook says whether a settings hook is avfs's hook for h: a
// command isOurs, or an HTTP hook posting to avfs serve's
// /v1/hooks/<h>.
func isOursHook(h Harness, hc HookCommand) bool {
	if hc.Type == "http" {
		u, err := url.Parse(hc.URL)
		return err == nil && strings.HasSuffix(u.Path, "/v1/hooks/"+string(h))
	}
	return isOurs(h, hc.Command)
}

// sameHook says whether an installed hook of avfs is the one Merge would
// write: the same command (other fields of the entry are the user's), or
// the same HTTP hook.
func sameHook(hc, ours HookCommand) bool {
	if hc.Type != ours.Type {
		return false
	}
	if ours.Type != "http" {
		return hc.Command == ours.Command
	}
	return hc.URL == ours.URL && maps.Equal(hc.Headers, ours.Headers) && slices.Equal(hc.AllowedEnvVars, ours.AllowedEnvVars) && hc.Timeout == ours.Timeout
}

// isOurs says whether a hook command is avfs's hook for h: its program is
// named avfs and it runs `hook <h>`.
func isOurs(h Harness, command string) bool {
	f := strings.Fields(command)
	if len(f) < 3 || filepath.Base(strings.Trim(f[0], `'"`)) != "avfs" {
		return false
	}
	i := slices.Index(f, "hook")
	return i > 0 && i+1 < len(f) && f[i+1] == string(h)
}

// Merge adds avfs's hooks for h, running command, to the settings
// document old (nil or empty for none) and returns the new document and
// whether it changed. Everything else in old is kept: other settings,
// other hooks and other groups, each value as it was (keys of the
// objects Merge touches are written in sorted order). A group already
// running avfs's hook for h (a command, or an HTTP hook posting to
// /v1/hooks/<h>) is kept when its command is command, and has that hook
// replaced otherwise, so a second Merge changes nothing. old that is not a JSON object is an error (nothing is merged).
func Merge(h Harness, old []byte, command string) ([]byte, bool, error) {
	ours := HookCommand{Type: "command", Command: command}
	if h == Gemini {
		ours.Name = "avfs"
	}
	return MergeHook(h, old, ours)
}

// MergeHook is Merge of the hook ours: a command hook, or Claude Code's
// HTTP hook (see HTTPHook), which takes the place of avfs's command hook
// (and the other way round), so that each event has one hook of avfs.
func MergeHook(h Harness, old []byte, ours HookCommand) ([]byte, bool, error) {
	entries, ok := hookEntries[h]
	if !ok {
		return nil, false, wire.Errorf(wire.CodeUsage, "unknown harness %q (want claude-code, codex or gemini)", h)
	}
	top := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := decodeStrict(old, &top); err != nil || top == nil {
			return nil, false, wire.Errorf(wire.CodeInvalidInput, "the settings file is not a JSON object; fix it by hand (it was left as it is)")
		}
	}
	hooks := map[string]json.RawMessage{}
	if raw, ok := top["hooks"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &hooks); err != nil || hooks == nil {
			return nil, false, wire.Errorf(wire.CodeInvalidInput, `the settings file's "hooks" is not a JSON object; fix it by hand (it was left as it is)`)
		}
	}
	changed := false
	for _, e := range entries {
		var groups []json.RawMessage
		if raw, ok := hooks[e.event]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, false, wire.Errorf(wire.CodeInvalidInput, "the settings file's hooks.%s is not a JSON array; fix it by hand (it was left as it is)", e.event)
			}
		}
		found := false
		for gi, g := range groups {
			var fields map[string]json.RawMessage
			if json.Unmarshal(g, &fields) != nil {
				continue // not ours: kept as it is
			}
			var list []json.RawMessage
			if json.Unmarshal(fields["hooks"], &list) != nil {
				continue
			}
			for hi, raw := range list {
				var hc HookCommand
				if json.Unmarshal(raw, &hc) != nil || !isOursHook(h, hc) {
					continue
				}
				found = true
				if sameHook(hc, ours) {
					continue
				}
				b, err := marshalSettings(ours)
				if err != nil {
					return nil, false, err
				}
				list[hi], changed = b, true
				lb, err := marshalSettings(list)
				if err != nil {
					return nil, false, err
				}
				fields["hooks"] = lb
				if groups[gi], err = marshalSettings(fields); err != nil {
					return nil, false, err
				}
			}
		}
		if found {
			if changed {
				b, err := marshalSettings(groups)
				if err != nil {
					return nil, false, err
				}
				hooks[e.event] = b
			}
			continue
		}
		g, err := marshalSettings(HookGroup{Matcher: e.matcher, Hooks: []HookCommand{ours}})
		if err != nil {
			return nil, false, err
		}
		b, err := marshalSettings(append(groups, g))
		if err != nil {
			return nil, false, err
		}
		hooks[e.event], changed = b, true
	}
	if !changed {
		return old, false, nil
	}
	hb, err := marshalSettings(hooks)
	if err != nil {
		return nil, false, err
	}
	top["hooks"] = hb
	b, err := marshalSettings(top)
	if err != nil {
		return nil, false, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}

// marshalSettings is json.Marshal without HTML escaping, so that a URL's
// & stays one.
func marshalSettings(v any) ([]byte, error) {
	b, err := marshal(v)
	return bytes.TrimSuffix(b, []byte("\n")), err
}

// InstallResult is the JSON document of `avfs hook install`.
type InstallResult struct {
	Harness Harness `json:"harness"`
	Path    string  `json:"path"`    // the settings file
	Changed bool    `json:"changed"` // false: avfs's hooks were there already
	DryRun  bool    `json:"dry_run"` // true: nothing was written
	// Settings is the settings file's content after the install (what a
	// dry run would write).
	Settings json.RawMessage `json:"settings"`
	// Workspace is the project's workspace, when the install brought it
	// up too (avfs hook install --workspace).
	Workspace *wire.WorkspaceStatus `json:"workspace,omitempty"`
}

// Install merges avfs's hooks for h, running command, into the settings
// file at path (see Merge) and writes it unless dryRun or nothing
// changed: to a temporary file beside it, then renamed over it, so the
// file is never half written; the directory is made if missing. A file
// that is not valid JSON is refused and never overwritten.
func Install(h Harness, path, command string, dryRun bool) (InstallResult, error) {
	ours := HookCommand{Type: "command", Command: command}
	if h == Gemini {
		ours.Name = "avfs"
	}
	return InstallHook(h, path, ours, dryRun)
}

// InstallHook is Install of the hook ours (see MergeHook). Only Claude
// Code has HTTP hooks: another harness with one is a usage error.
func InstallHook(h Harness, path string, ours HookCommand, dryRun bool) (InstallResult, error) {
	res := InstallResult{Harness: h, Path: path, DryRun: dryRun}
	if ours.Type == "http" && h != ClaudeCode {
		return res, wire.Errorf(wire.CodeUsage, "hook install: %s has command hooks only (HTTP hooks are Claude Code's)", h)
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, wire.Errorf(wire.CodeInvalidInput, "read %s: %v", path, err)
	}
	updated, changed, err := MergeHook(h, old, ours)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return res, wire.Errorf(we.Code, "%s: %s", path, we.Message)
		}
		return res, err
	}
	res.Changed = changed
	if len(bytes.TrimSpace(updated)) == 0 {
		updated = []byte("{}")
	}
	res.Settings = json.RawMessage(bytes.TrimSpace(updated))
	if dryRun || !changed {
		return res, nil
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := writeAtomic(path, updated, mode); err != nil {
		return res, wire.Errorf(wire.CodeInvalidInput, "write %s: %v", path, err)
	}
	return res, nil
}

func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".avfs-")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr, os.Chmod(f.Name(), mode)); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("rename: %w", err)
	}
	return nil
}
