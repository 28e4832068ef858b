package manage

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"avfs/bundles"
	"avfs/runner"
	"avfs/server"
	"avfs/vault"
	"avfs/wire"
)

// TestServeHealthAndSwap: avfs serve with a Manager answers
// /health?bundles&plugins 500, saying which bundle, until nginx serves
// the bundle, then 200; the policy it decides with is swapped to the
// bundle's without a restart, and again to its next revision.
func TestServeHealthAndSwap(t *testing.T) {
	n := startNginx(t)
	home, dir := t.TempDir(), t.TempDir()
	path := opaConfig(t, dir, n.url, "", "")
	cfg, err := LoadConfig(path, filepath.Join(home, "opa"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := bundles.Default()
	if err != nil {
		t.Fatal(err)
	}
	var srv atomic.Pointer[server.Server]
	m, err := New(context.Background(), cfg, Options{Local: &bundles.Set{Bundles: []*bundles.Bundle{def}}, OnChange: func() {
		if s := srv.Load(); s != nil {
			s.PolicyChanged()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	load := func(ctx context.Context) (*runner.Runner, []string, error) {
		return &runner.Runner{Store: vault.NewStore(home, vault.Options{Actor: "test"}), Policy: m.Policy(), HostEnv: os.Environ(),
			RunDir: filepath.Join(home, "run")}, nil, nil
	}
	s, err := server.New(context.Background(), server.Config{Load: load, Poll: -1, Version: "test", Managed: m})
	if err != nil {
		t.Fatal(err)
	}
	srv.Store(s)
	s.PolicyChanged() // what changed before srv was stored
	sock := filepath.Join(t.TempDir(), "avfs.sock")
	ln, err := server.Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	get := func(url string, into any) int {
		t.Helper()
		resp, err := client.Get("http://avfs" + url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	decide := func() wire.DecideResult {
		t.Helper()
		body := strings.NewReader(`{"argv": ["ls"]}`)
		resp, err := client.Post("http://avfs/v1/decide", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res wire.DecideResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	ids := func(res wire.DecideResult) []string {
		var out []string
		for _, r := range res.Reasons {
			out = append(out, r.ID)
		}
		return out
	}

	// Nothing served yet: not ready, and every run denied saying why.
	var h wire.ServeHealth
	if code := get("/health?bundles&plugins", &h); code != http.StatusInternalServerError || h.Status != "not_ready" ||
		!slices.Contains(h.BundlesNotActivated, "remote") || h.PluginsNotOK[PluginName] == "" {
		t.Fatalf("health before any bundle: %d %+v", code, h)
	}
	if code := get("/health", &h); code != http.StatusOK {
		t.Fatalf("liveness before any bundle: %d %+v", code, h)
	}
	if res := decide(); res.Decision != wire.Deny || !slices.Equal(ids(res), []string{"avfs.engine.policy_unavailable"}) {
		t.Fatalf("decision before any bundle: %+v", res)
	}

	publish(t, n.root, bundlePath, testBundle{revision: "r1", rego: denyModule("r1")})
	poll(t, 15*time.Second, "health 200", func() bool {
		h = wire.ServeHealth{}
		return get("/health?bundles&plugins", &h) == http.StatusOK && h.Status == "ok"
	})
	poll(t, 5*time.Second, "the policy swapped to r1", func() bool { return slices.Contains(ids(decide()), "remote.r1") })

	publish(t, n.root, bundlePath, testBundle{revision: "r2", rego: denyModule("r2")})
	poll(t, 15*time.Second, "the policy swapped to r2", func() bool {
		res := decide()
		return slices.Contains(ids(res), "remote.r2") && !slices.Contains(ids(res), "remote.r1")
	})
	var st wire.ServeStatus
	get("/v1/status", &st)
	if !slices.ContainsFunc(st.Bundles, func(b wire.BundleInfo) bool { return b.Name == "remote" && b.Revision == "r2" }) {
		t.Fatalf("status bundles: %+v", st.Bundles)
	}
}
