package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"avfs/engine"
	"avfs/wire"
)

// writeOPAConfig writes OPA's configuration of the bundle "remote" from
// a service on a port nothing listens on, persisted: only what was
// persisted earlier can ever activate.
func writeOPAConfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "opa.yaml")
	text := `services:
  bundles:
    url: http://127.0.0.1:1
bundles:
  remote:
    service: bundles
    resource: bundles/remote.tar.gz
    persist: true
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// persistBundle writes a bundle of revision rev where OPA's bundle plugin
// persists "remote" under persistDir, as a run before this one would have
// left it: it denies every command with the reason remote.REV.
func persistBundle(t *testing.T, persistDir, rev string) {
	t.Helper()
	rego := "package extensions.remote\n\nreasons contains {\"id\": \"remote." + rev + "\", \"message\": \"no\", \"decision\": \"deny\"}\n"
	parsed, err := ast.ParseModuleWithOpts("/remote.rego", rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{"extensions/remote"}
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: rev, Roots: &roots}, Data: map[string]any{},
		Modules: []bundle.ModuleFile{{URL: "/remote.rego", Path: "/remote.rego", Raw: []byte(rego), Parsed: parsed}}}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(persistDir, "bundles", "remote")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bundle.tar.gz"), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOPAConfigOneShot: with OPA's configuration (policy.opa_config or
// --config-file) and its bundle service down, a one-shot command denies
// every run saying which bundle was never activated after waiting
// policy.opa_wait; once a bundle was persisted (in $AVFS_HOME/opa by
// default), it decides with that bundle at once; the configuration file
// and the persistence directory are trusted as the config is.
func TestOPAConfigOneShot(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	opaPath := writeOPAConfig(t, t.TempDir())
	cfgPath := filepath.Join(a.home, "config.json")
	cfg := map[string]any{"policy": map[string]any{"opa_config": opaPath, "opa_wait": "300ms"}}
	bs, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, bs, 0o600); err != nil {
		t.Fatal(err)
	}

	r := a.proxy(nil, "true")
	r.want(t, wire.Deny, wire.ExitNotRun)
	if ids := reasonIDsOf(r.env); !slices.Equal(ids, []string{engine.ReasonPolicyUnavailable}) ||
		!strings.Contains(r.env.Policy.Reasons[0].Message, "remote") {
		t.Fatalf("without any bundle: reasons %+v", r.env.Policy.Reasons)
	}
	ev := a.exec(nil, "--json", "policy", "eval", "--config-file", opaPath, "--", "ls")
	var res wire.PolicyResult
	if err := json.Unmarshal(ev.stdout, &res); err != nil || ev.code != 0 || res.Decision != wire.Deny ||
		len(res.Reasons) != 1 || res.Reasons[0].ID != engine.ReasonPolicyUnavailable {
		t.Fatalf("policy eval --config-file without any bundle: %d %s (%v)", ev.code, ev.stdout, err)
	}

	// A bundle persisted by an earlier run: used offline, without waiting.
	persistBundle(t, filepath.Join(a.home, "opa"), "r1")
	if err := os.WriteFile(cfgPath, []byte(`{"policy": {"opa_config": "`+opaPath+`", "opa_wait": "1m"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r = a.proxy(nil, "true")
	r.want(t, wire.Deny, wire.ExitNotRun)
	if took := time.Since(start); took > 30*time.Second || !slices.Contains(reasonIDsOf(r.env), "remote.r1") {
		t.Fatalf("with the persisted bundle (took %s): reasons %+v", took, r.env.Policy.Reasons)
	}
	if !slices.ContainsFunc(r.env.Policy.Bundles, func(b wire.BundleInfo) bool { return b.Name == "remote" && b.Revision == "r1" }) {
		t.Fatalf("bundles %+v, want remote@r1", r.env.Policy.Bundles)
	}

	// Without a sandbox, a command that could rewrite the OPA
	// configuration or the persisted bundles is refused.
	r = a.proxy([]string{"--sandbox", "none"}, "true")
	if r.env.Error == nil || r.env.Error.Code != wire.CodeWritableTrust || !strings.Contains(r.env.Error.Message, opaPath) ||
		!strings.Contains(r.env.Error.Message, filepath.Join(a.home, "opa")) {
		t.Fatalf("without a sandbox: %s", r.raw)
	}

	// A broken configuration is a typed error, not a decision.
	if err := os.WriteFile(opaPath, []byte("bundles: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = a.proxy(nil, "true")
	if r.env.Error == nil || r.env.Error.Code != wire.CodeInvalidInput || r.env.Process != nil {
		t.Fatalf("broken OPA configuration: %s", r.raw)
	}
}

// bundleServer is a bundle service on loopback serving one tarball with
// an ETag (404 while there is none).
type bundleServer struct {
	*httptest.Server
	mu      sync.Mutex
	tarball []byte
}

func startBundleServer(t *testing.T) *bundleServer {
	t.Helper()
	s := &bundleServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b := s.tarball
		s.mu.Unlock()
		if b == nil {
			http.NotFound(w, r)
			return
		}
		etag := fmt.Sprintf(`"%x"`, sha256.Sum256(b))
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// serveBundle makes s serve the bundle of revision rev (persistBundle's).
func (s *bundleServer) serveBundle(t *testing.T, rev string) {
	t.Helper()
	dir := t.TempDir()
	persistBundle(t, dir, rev)
	b, err := os.ReadFile(filepath.Join(dir, "bundles", "remote", "bundle.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.tarball = b
	s.mu.Unlock()
}

// TestServeOPAConfig: avfs serve --config-file is not ready, and denies,
// until the bundle service serves the bundle; then it swaps the policy
// to each revision served, without a restart.
func TestServeOPAConfig(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	bs := startBundleServer(t)
	opaPath := filepath.Join(t.TempDir(), "opa.json")
	text := `{"services": {"b": {"url": "` + bs.URL + `"}}, "bundles": {"remote": {"service": "b", "resource": "bundles/remote.tar.gz",
		"polling": {"min_delay_seconds": 1, "max_delay_seconds": 1}}}}`
	if err := os.WriteFile(opaPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	d := a.serve("--config-file", opaPath)
	health := func() (int, wire.ServeHealth) {
		code, b := d.get("/health?bundles&plugins")
		var h wire.ServeHealth
		json.Unmarshal(b, &h)
		return code, h
	}
	if code, h := health(); code != http.StatusInternalServerError || !slices.Contains(h.BundlesNotActivated, "remote") {
		t.Fatalf("health before the bundle: %d %+v", code, h)
	}
	revisions := func() string {
		for _, b := range d.status().Bundles {
			if b.Name == "remote" {
				return b.Revision
			}
		}
		return ""
	}
	if rev := revisions(); rev != "" {
		t.Fatalf("a remote revision before the bundle: %q", rev)
	}
	for _, rev := range []string{"r1", "r2"} {
		bs.serveBundle(t, rev)
		for deadline := time.Now().Add(20 * time.Second); revisions() != rev; {
			if time.Now().After(deadline) {
				t.Fatalf("the policy is not swapped to %s: %s", rev, d.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if code, h := health(); code != http.StatusOK {
		t.Fatalf("health after the bundle: %d %+v", code, h)
	}
	// A change to OPA's configuration needs a restart: it is a reload
	// error, and the policy in use stays.
	if err := os.WriteFile(opaPath, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); d.status().LastReloadError == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no reload error after OPA's configuration changed: %s", d.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := d.status(); !strings.Contains(st.LastReloadError.Message, "restart") || revisions() != "r2" {
		t.Fatalf("after OPA's configuration changed: %+v", st)
	}
}

// TestOPADecisionLogOneShot: with decision_logs in OPA's configuration, a
// one-shot proxy exec's decision reaches the decision-log service before
// the command exits, under the envelope's decision_id, with the revision
// of the bundle that decided.
func TestOPADecisionLogOneShot(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []map[string]any
	logs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var batch []map[string]any
		if err := json.NewDecoder(zr).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		events = append(events, batch...)
		mu.Unlock()
	}))
	t.Cleanup(logs.Close)

	a := newProxyAVFS(t)
	persistBundle(t, filepath.Join(a.home, "opa"), "r7")
	opaPath := filepath.Join(t.TempDir(), "opa.yaml")
	text := `services:
  bundles:
    url: http://127.0.0.1:1
  logs:
    url: ` + logs.URL + `
bundles:
  remote:
    service: bundles
    resource: bundles/remote.tar.gz
    persist: true
decision_logs:
  service: logs
  reporting:
    min_delay_seconds: 300
    max_delay_seconds: 600
`
	if err := os.WriteFile(opaPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"policy": {"opa_config": "`+opaPath+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := a.proxy(nil, "true")
	r.want(t, wire.Deny, wire.ExitNotRun)
	if r.env.DecisionID == "" {
		t.Fatal("the envelope has no decision_id")
	}
	// The upload delay is minutes: what arrived was flushed at exit.
	mu.Lock()
	defer mu.Unlock()
	var got map[string]any
	for _, ev := range events {
		if ev["decision_id"] == r.env.DecisionID {
			got = ev
		}
	}
	if got == nil {
		t.Fatalf("no event with decision_id %s among %d", r.env.DecisionID, len(events))
	}
	if bs, _ := json.Marshal(got["bundles"]); !strings.Contains(string(bs), `"remote":{"revision":"r7"}`) {
		t.Fatalf("event bundles %s, want remote at r7", bs)
	}
	if in, _ := got["input"].(map[string]any); in == nil || in["command"] == nil {
		t.Fatalf("event input %v", got["input"])
	}
}
