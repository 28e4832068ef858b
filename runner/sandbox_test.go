package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

// TestResolveView: the view a run is decided and held in, with a fake
// probe standing for the kernel.
func TestResolveView(t *testing.T) {
	refused := func() error { return wire.Errorf(wire.CodeSandbox, "sandbox: clone: operation not permitted") }
	willing := func() error { return nil }
	for _, c := range []struct {
		name, config, flag string
		probe              func() error
		mode               wire.SandboxMode
		reason             string // a part of it
		code               wire.Code
	}{
		{"auto, willing kernel", "", "", willing, wire.SandboxNamespaces, "", ""},
		{"auto, refusing kernel", "", "auto", refused, wire.SandboxNone, "the kernel refused a sandbox", ""},
		{"namespaces, refusing kernel", "", "namespaces", refused, "", "", wire.CodeSandbox},
		{"none by flag", "namespaces", "none", willing, wire.SandboxNone, "--sandbox none", ""},
		{"none by config", "none", "", willing, wire.SandboxNone, "in the config", ""},
		{"bad mode", "", "chroot", willing, "", "", wire.CodeInvalidInput},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Runner{Sandbox: SandboxConfig{Mode: c.config}}
			vw, err := r.resolveView(Request{Sandbox: c.flag}, c.probe, "")
			if c.code != "" {
				if !wire.HasCode(err, c.code) {
					t.Fatalf("got %v, want code %s", err, c.code)
				}
				return
			}
			if err != nil || vw.input.Mode != c.mode || !strings.Contains(vw.input.Reason, c.reason) {
				t.Fatalf("got %+v %v", vw.input, err)
			}
			if c.mode == wire.SandboxNamespaces && (vw.input.Workspace != "/workspace" || len(vw.input.ReadOnlySystem) == 0) {
				t.Fatalf("view %+v", vw.input)
			}
		})
	}
}

// TestViewReport: the network the envelope reports is the decision's
// grant in a sandbox, and the host's without one.
func TestViewReport(t *testing.T) {
	r := &Runner{}
	vw, _ := r.resolveView(Request{}, func() error { return nil }, "")
	if got := vw.report(wire.SandboxGrant{}, "/run/x").Network; got != wire.NetworkNone {
		t.Errorf("no grant: %s", got)
	}
	if got := vw.report(wire.SandboxGrant{Network: wire.NetworkHost}, "/run/x").Network; got != wire.NetworkHost {
		t.Errorf("grant: %s", got)
	}
	none, _ := r.resolveView(Request{Sandbox: SandboxNone}, nil, "")
	if rep := none.report(wire.SandboxGrant{}, "/run/x"); rep.Network != wire.NetworkHost || rep.Workspace != "/run/x" {
		t.Errorf("none: %+v", rep)
	}
}

// TestCheckTrust: without a sandbox, a run is refused while its command
// could rewrite a trusted file; missing ones do not count.
func TestCheckTrust(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte("{}"), 0o644)
	err := checkTrust([]string{cfg, filepath.Join(dir, "policy"), ""}, "--sandbox none")
	if !wire.HasCode(err, wire.CodeWritableTrust) || !strings.Contains(err.Error(), cfg) {
		t.Fatalf("writable config: %v", err)
	}
	if err := checkTrust([]string{filepath.Join(dir, "missing")}, "x"); err != nil {
		t.Fatalf("missing file: %v", err)
	}
	var we *wire.Error
	if !errors.As(checkTrust([]string{cfg}, "x"), &we) || we.Details["paths"] == nil {
		t.Fatalf("details: %+v", we)
	}
}

// TestSandboxSpec: what a run's sandbox is built from.
func TestSandboxSpec(t *testing.T) {
	base := t.TempDir()
	os.Mkdir(filepath.Join(base, "root"), 0o700)
	r := &Runner{Sandbox: SandboxConfig{CacheDir: filepath.Join(base, "cache"), HomeFiles: []string{".no-such-file"}}, HostEnv: []string{"PATH=/usr/bin:/bin"}}
	vw, _ := r.resolveView(Request{}, func() error { return nil }, "")
	ws := &workspace{dir: filepath.Join(base, "root"), base: base}
	spec, err := r.sandboxSpec(Request{}, vw, wire.SandboxGrant{Network: wire.NetworkHost}, ws, "/src", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Dir != "/workspace/src" || spec.Workspace != ws.dir || spec.Network != wire.NetworkHost || spec.Cache != filepath.Join(base, "cache", "v1") || len(spec.HomeFiles) != 0 {
		t.Fatalf("spec %+v", spec)
	}
	if fi, err := os.Stat(spec.Cache); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache %v %v", fi, err)
	}
	r.Sandbox.HomeFiles = []string{"../etc/shadow"}
	os.Remove(filepath.Join(base, "view"))
	if _, err := r.sandboxSpec(Request{}, vw, wire.SandboxGrant{}, ws, "/", "v1"); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("a home file outside the home: %v", err)
	}
}
