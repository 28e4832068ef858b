package manage

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"avfs/bundles"
	"avfs/engine"
	"avfs/wire"
)

const bundlePath = "/bundles/remote.tar.gz"

// opaConfig writes an OPA configuration: the bundle "remote" from the
// service at bundleURL (1s polling, persisted, signed with the HMAC key
// "k" when key is set) and status reports to statusURL when set.
func opaConfig(t *testing.T, dir, bundleURL, statusURL, key string) string {
	t.Helper()
	src := map[string]any{"service": "bundles", "resource": strings.TrimPrefix(bundlePath, "/"), "persist": true,
		"polling": map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 1}}
	doc := map[string]any{
		"services": map[string]any{"bundles": map[string]any{"url": bundleURL}},
		"bundles":  map[string]any{"remote": src},
		"labels":   map[string]any{"app": "avfs-test"},
	}
	if key != "" {
		doc["keys"] = map[string]any{"k": map[string]any{"key": key, "algorithm": "HS256"}}
		src["signing"] = map[string]any{"keyid": "k"}
	}
	if statusURL != "" {
		doc["services"].(map[string]any)["status"] = map[string]any{"url": statusURL}
		doc["status"] = map[string]any{"service": "status"}
	}
	bs, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "opa.json")
	if err := os.WriteFile(path, bs, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// start loads the configuration at path and starts a Manager over the
// default bundle; it is stopped when the test ends.
func start(t *testing.T, path, persist string, onChange func()) *Manager {
	t.Helper()
	cfg, err := LoadConfig(path, persist)
	if err != nil {
		t.Fatal(err)
	}
	def, err := bundles.Default()
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(context.Background(), cfg, Options{Local: &bundles.Set{Bundles: []*bundles.Bundle{def}}, OnChange: onChange})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// reasons are the reason ids of p's decision on any command.
func reasons(t *testing.T, p *engine.Policy) []string {
	t.Helper()
	res, err := p.Decide(context.Background(), &wire.Input{}, engine.DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res.Reasons {
		ids = append(ids, r.ID)
	}
	return ids
}

// revision is the revision of the bundle "remote" in p, "" without it.
func revision(p *engine.Policy) string {
	for _, b := range p.Bundles() {
		if b.Name == "remote" {
			return b.Revision
		}
	}
	return ""
}

// TestBundleLifecycle: a signed bundle from nginx becomes the policy, is
// fetched again with its ETag (a 304), is replaced without a restart when
// nginx serves a new one, a tampered one and one that cannot be compiled
// are refused with the previous policy kept and reported, status reports
// carry the revisions, and a Manager started while nginx is down decides
// with the persisted bundle at once.
func TestBundleLifecycle(t *testing.T) {
	n := startNginx(t)
	recv := startStatusReceiver(t)
	dir, persist := t.TempDir(), filepath.Join(t.TempDir(), "opa")
	const key = "s3cr3t-bundle-key"
	publish(t, n.root, bundlePath, testBundle{revision: "r1", rego: denyModule("r1"), key: key})
	path := opaConfig(t, dir, n.url, recv.URL, key)
	var changes atomic.Int64
	m := start(t, path, persist, func() { changes.Add(1) })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := m.Wait(ctx)
	if p.Unavailable() != "" || revision(p) != "r1" || !slices.Contains(reasons(t, p), "remote.r1") {
		t.Fatalf("after the first activation: unavailable %q, bundles %+v, reasons %v", p.Unavailable(), p.Bundles(), reasons(t, p))
	}
	if !slices.ContainsFunc(p.Bundles(), func(b wire.BundleInfo) bool { return b.Name == bundles.DefaultName }) {
		t.Fatalf("the default bundle is not in the policy: %+v", p.Bundles())
	}
	if _, set := m.Current(); !slices.ContainsFunc(set.Bundles, func(b *bundles.Bundle) bool { return b.Name == "remote" && b.Signed && b.Verified }) {
		t.Errorf("the signed bundle is not said verified: %+v", set.Bundles)
	}
	if got := m.NotActivated(); len(got) != 0 {
		t.Errorf("NotActivated after activation: %v", got)
	}
	poll(t, 10*time.Second, "all plugins OK", func() bool { return len(m.PluginsNotOK()) == 0 })
	poll(t, 10*time.Second, "a 304 for the unchanged bundle", func() bool {
		codes := n.requests(t, bundlePath)
		return len(codes) >= 2 && codes[0] == "200" && slices.Contains(codes[1:], "304")
	})

	// A new revision is picked up without a restart.
	before := changes.Load()
	publish(t, n.root, bundlePath, testBundle{revision: "r2", rego: denyModule("r2"), key: key})
	poll(t, 15*time.Second, "revision r2", func() bool { return revision(m.Policy()) == "r2" })
	if p := m.Policy(); !slices.Contains(reasons(t, p), "remote.r2") || slices.Contains(reasons(t, p), "remote.r1") {
		t.Fatalf("r2's policy decides %v", reasons(t, p))
	}
	if changes.Load() == before {
		t.Error("OnChange was not called for r2")
	}
	defer func() {
		if t.Failed() {
			bs, _ := json.Marshal(recv.last())
			t.Logf("last status report: %s", bs)
		}
	}()
	poll(t, 10*time.Second, "a status report with revision r2", func() bool {
		return recv.any(func(u report) bool {
			return u.Bundles["remote"].ActiveRevision == "r2" && u.Labels["app"] == "avfs-test" && u.Plugins[PluginName].State == "OK"
		})
	})

	// A tampered bundle is refused: r2 stays, and the status says why.
	publish(t, n.root, bundlePath, testBundle{revision: "r3", rego: denyModule("r3"), key: key, tamper: true})
	poll(t, 15*time.Second, "a status report of the refused signature", func() bool {
		u := recv.last()
		b := u.Bundles["remote"]
		return b.Code != "" && strings.Contains(b.Message+strings.Join(b.Errors, "; "), "digest mismatch")
	})
	if p := m.Policy(); revision(p) != "r2" || slices.Contains(reasons(t, p), "remote.r3") {
		t.Fatalf("after a tampered bundle: %+v, %v", p.Bundles(), reasons(t, p))
	}
	poll(t, 10*time.Second, "the policy plugin warning of the refused bundle", func() bool {
		s := m.PluginsNotOK()[PluginName]
		return strings.HasPrefix(s, "WARN") && strings.Contains(s, "bundle remote")
	})

	// A bundle OPA activates but avfs cannot compile (a refused builtin):
	// r2 stays, and the policy's plugin reports the error.
	publish(t, n.root, bundlePath, testBundle{revision: "r4", key: key, rego: `package extensions.remote

reasons contains {"id": "remote.r4", "message": "x", "decision": "deny"} if time.now_ns() > 0
`})
	poll(t, 15*time.Second, "the policy plugin in error", func() bool {
		return strings.Contains(m.PluginsNotOK()[PluginName], "time.now_ns")
	})
	if p := m.Policy(); revision(p) != "r2" || !slices.Contains(reasons(t, p), "remote.r2") {
		t.Fatalf("after an uncompilable bundle: %+v, %v", p.Bundles(), reasons(t, p))
	}
	poll(t, 10*time.Second, "a status report of the policy plugin's error", func() bool {
		u := recv.last()
		s := u.Plugins[PluginName]
		return s.State == "ERROR" && strings.Contains(s.Message, "time.now_ns")
	})

	// Offline: nginx is down, and a new Manager decides with the last
	// bundle persisted, r5, at once.
	publish(t, n.root, bundlePath, testBundle{revision: "r5", rego: denyModule("r5"), key: key})
	poll(t, 15*time.Second, "revision r5", func() bool { return revision(m.Policy()) == "r5" })
	poll(t, 10*time.Second, "all plugins OK again", func() bool { return len(m.PluginsNotOK()) == 0 })
	m.Stop(context.Background())
	n.stop()
	offline := start(t, path, persist, nil)
	p = offline.Policy() // no Wait: the persisted bundle is activated by Start
	if p.Unavailable() != "" || revision(p) != "r5" || !slices.Contains(reasons(t, p), "remote.r5") {
		t.Fatalf("offline: unavailable %q, bundles %+v, reasons %v", p.Unavailable(), p.Bundles(), reasons(t, p))
	}
}

// TestNeverActivated: with the bundle service unreachable and nothing
// persisted, every decision is deny with ReasonPolicyUnavailable naming
// the bundle, and health says which bundle and plugins are not ready.
func TestNeverActivated(t *testing.T) {
	dir := t.TempDir()
	// A port nothing listens on: the listener is closed at once.
	path := opaConfig(t, dir, "http://127.0.0.1:1", "", "")
	m := start(t, path, filepath.Join(dir, "persist"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	p := m.Wait(ctx)
	res, err := p.Decide(context.Background(), &wire.Input{}, engine.DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != wire.Deny || len(res.Reasons) != 1 || res.Reasons[0].ID != engine.ReasonPolicyUnavailable ||
		!strings.Contains(res.Reasons[0].Message, "remote") {
		t.Fatalf("decision without any bundle: %+v", res)
	}
	if got := m.NotActivated(); !slices.Contains(got, "remote") {
		t.Errorf("NotActivated %v, want remote", got)
	}
	notOK := m.PluginsNotOK()
	if !strings.HasPrefix(notOK[PluginName], "NOT_READY") || notOK["bundle"] == "" {
		t.Errorf("PluginsNotOK %v, want %s and bundle not ready", notOK, PluginName)
	}
}

// TestLoadConfig: the persistence directory defaults to the one given,
// a relative one is relative to the file, and bad files are invalid_input.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, text  string
		wantPersist string
		wantErr     wire.Code
	}{
		{"default persistence", `{"bundles": {"b": {"resource": "x"}}}`, "/def", ""},
		{"relative persistence", "persistence_directory: p\n", filepath.Join(dir, "p"), ""},
		{"absolute persistence", `{"persistence_directory": "/abs"}`, "/abs", ""},
		{"not a document", `{`, "", wire.CodeInvalidInput},
		{"default bundle name", `{"bundles": {"default": {"resource": "x"}}}`, "", wire.CodeInvalidInput},
		{"persistence not a string", `{"persistence_directory": 3}`, "", wire.CodeInvalidInput},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.Repeat("c", i+1)+".yaml")
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path, "/def")
			if tt.wantErr != "" {
				if wire.CodeOf(err) != tt.wantErr {
					t.Fatalf("got %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.PersistenceDirectory != tt.wantPersist || !strings.Contains(string(cfg.Raw), tt.wantPersist) {
				t.Errorf("persistence %q (raw %s), want %q", cfg.PersistenceDirectory, cfg.Raw, tt.wantPersist)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.json"), "/def"); wire.CodeOf(err) != wire.CodeInvalidInput {
		t.Errorf("missing file: %v", err)
	}
}

// TestBadConfig: a configuration OPA refuses is invalid_input from New.
func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "opa.json")
	if err := os.WriteFile(path, []byte(`{"bundles": {"b": {"service": "nowhere", "resource": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{}); wire.CodeOf(err) != wire.CodeInvalidInput || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want invalid_input naming the file", err)
	}
}

// TestPluginsFromConfig: the status and decision-log plugins are made
// from the configuration, as OPA's runtime makes them, and the Manager's
// OPA is the manager they are registered with.
func TestPluginsFromConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "opa.yaml")
	text := "services:\n  s:\n    url: http://127.0.0.1:1\nstatus:\n  service: s\ndecision_logs:\n  service: s\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	m := start(t, path, filepath.Join(dir, "persist"), nil)
	for _, name := range []string{"status", "decision_logs", "discovery", PluginName} {
		if m.OPA().Plugin(name) == nil {
			t.Errorf("no plugin %s", name)
		}
	}
	// No bundle configured: the local bundles decide at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if p := m.Wait(ctx); p.Unavailable() != "" || len(p.Bundles()) != 1 {
		t.Fatalf("without bundles: unavailable %q, bundles %+v", p.Unavailable(), p.Bundles())
	}
}
