package manage

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// publishDiscovery writes, at root/rel, a discovery bundle whose data is
// the configuration doc (OPA's discovery plugin evaluates the bundle's
// data into the configuration of the other plugins).
func publishDiscovery(t *testing.T, root, rel, revision string, doc map[string]any) {
	t.Helper()
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: revision}, Data: doc}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	serve(t, path, buf.Bytes())
}

// serve makes data the file nginx serves at path: written aside and
// renamed, so nginx never serves half a bundle. nginx's ETag is the
// file's modification time (in seconds) and size, so a bundle of the same
// size written within the same second as the one it replaces would be
// answered 304: a replacement is dated after it.
func serve(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil {
		at := fi.ModTime().Add(2 * time.Second)
		if err := os.Chtimes(path+".tmp", at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestDiscovery: with only a discovery section in OPA's configuration,
// the policy denies every run until the discovery bundle arrives; the
// bundle it names is then fetched and becomes the policy, and a new
// discovery bundle naming another resource moves the policy to it
// without a restart.
func TestDiscovery(t *testing.T) {
	n := startNginx(t)
	dir, persist := t.TempDir(), filepath.Join(t.TempDir(), "opa")
	doc := map[string]any{
		"services": map[string]any{"web": map[string]any{"url": n.url}},
		"discovery": map[string]any{"service": "web", "resource": "discovery/config.tar.gz",
			"polling": map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 1}},
	}
	bs, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "opa.json")
	if err := os.WriteFile(path, bs, 0o600); err != nil {
		t.Fatal(err)
	}
	m := start(t, path, persist, nil)

	// No discovery bundle yet: every run is denied, saying why.
	if p := m.Policy(); p.Unavailable() == "" {
		t.Fatalf("before the discovery bundle: the policy is available (%+v)", p.Bundles())
	}
	if got := m.NotActivated(); !slices.Contains(got, "discovery") {
		t.Fatalf("NotActivated before the discovery bundle: %v", got)
	}

	remote := func(resource string) map[string]any {
		return map[string]any{"bundles": map[string]any{"remote": map[string]any{"service": "web", "resource": resource,
			"polling": map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 1}}}}
	}
	publish(t, n.root, "/bundles/a.tar.gz", testBundle{revision: "a1", rego: denyModule("a1")})
	publish(t, n.root, "/bundles/b.tar.gz", testBundle{revision: "b1", rego: denyModule("b1")})
	publishDiscovery(t, n.root, "/discovery/config.tar.gz", "d1", remote("bundles/a.tar.gz"))
	poll(t, 20*time.Second, "the bundle discovery names", func() bool { return revision(m.Policy()) == "a1" })
	if p := m.Policy(); p.Unavailable() != "" || !slices.Contains(reasons(t, p), "remote.a1") {
		t.Fatalf("after discovery: unavailable %q, reasons %v", p.Unavailable(), reasons(t, p))
	}

	// A new discovery bundle reconfigures the bundle plugin: the policy
	// follows, without a restart.
	publishDiscovery(t, n.root, "/discovery/config.tar.gz", "d2", remote("bundles/b.tar.gz"))
	poll(t, 20*time.Second, "the bundle the new discovery names", func() bool { return revision(m.Policy()) == "b1" })
	if p := m.Policy(); !slices.Contains(reasons(t, p), "remote.b1") || slices.Contains(reasons(t, p), "remote.a1") {
		t.Fatalf("after rediscovery: reasons %v", reasons(t, p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p := m.Wait(ctx); p.Unavailable() != "" {
		t.Fatalf("Wait after discovery: unavailable %q", p.Unavailable())
	}
}
