package main

// End-to-end tests of the envelope's hints: a command that fails in a
// sandbox without the network because it tried to reach one gets a
// network_off hint; other runs get none.

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/wire"
)

// networkOff returns the run's network_off hint, failing the test unless
// the run was held in namespaces without the network and has exactly
// that one hint.
func (r proxyRun) networkOff(t *testing.T) wire.Hint {
	t.Helper()
	if r.env.Sandbox == nil || r.env.Sandbox.Mode != wire.SandboxNamespaces || r.env.Sandbox.Network != wire.NetworkNone {
		t.Fatalf("avfs %q: sandbox %+v, want namespaces without the network\n%s", r.args, r.env.Sandbox, r.raw)
	}
	if len(r.env.Hints) != 1 || r.env.Hints[0].Code != wire.HintNetworkOff {
		t.Fatalf("avfs %q: hints %+v, want one network_off\n%s", r.args, r.env.Hints, r.raw)
	}
	h := r.env.Hints[0]
	for _, s := range []string{`sandbox.network "none"`, "host_network_reasons", "--sandbox none"} {
		if !strings.Contains(h.Message, s) {
			t.Errorf("avfs %q: the hint does not say %q: %s", r.args, s, h.Message)
		}
	}
	return h
}

// noHints fails the test if the run has hints (or the key at all).
func (r proxyRun) noHints(t *testing.T) {
	t.Helper()
	if _, ok := r.doc["hints"]; ok {
		t.Fatalf("avfs %q: hints, want none\n%s", r.args, r.raw)
	}
}

// TestProxyNetworkOffHint: a program the default policy allows that tries
// the network in a sandbox without one fails there, and the envelope says
// why and how to get the network.
func TestProxyNetworkOffHint(t *testing.T) {
	t.Parallel()
	t.Run("go build with a module missing", func(t *testing.T) {
		t.Parallel()
		goBin, err := exec.LookPath("go")
		if err != nil {
			t.Skip("no go on the PATH")
		}
		a := newProxyAVFS(t).with("PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin")
		a.ok("mkdir", "/src")
		a.write("module example.com/m\n\ngo 1.21\n\nrequire golang.org/x/text v0.14.0\n", "/src/go.mod")
		a.write("package main\n\nimport _ \"golang.org/x/text/language\"\n\nfunc main() {}\n", "/src/main.go")
		// -mod=mod: without a go.sum the go command fetches the module
		// instead of refusing to build.
		r := a.proxy([]string{"--cwd", "/src"}, "go", "build", "-mod=mod", "./...")
		r.want(t, wire.AllowWithCheckpoint, 1)
		h := r.networkOff(t)
		if want := "avfs --vault default proxy exec --cwd /src -- go mod download"; h.Command != want {
			t.Fatalf("command %q, want %q", h.Command, want)
		}
		// The hint's command asks for approval, and approved it would
		// have the host's network.
		words := strings.Fields(h.Command)
		fetch := a.exec(nil, append([]string{"--json"}, words[1:]...)...)
		fr := decodeProxyRun(t, words[1:], fetch.code, fetch.stdout, fetch.stderr)
		fr.want(t, wire.RequireApproval, wire.ExitNotRun)
		if fr.env.Approval == nil || !slices.Contains(reasonIDsOf(fr.env), "avfs.approval.packages") {
			t.Fatalf("the hint's command: %s", fr.raw)
		}
		var eval wire.PolicyResult
		a.into(&eval, "policy", "eval", "--cwd", "/src", "--approval", fr.env.Approval.ID, "--shell", "go mod download")
		if eval.Sandbox.Network != wire.NetworkHost {
			t.Fatalf("policy eval of the approved fetch: %+v", eval)
		}
	})
	t.Run("python reaching a server", func(t *testing.T) {
		t.Parallel()
		python, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("no python3 on the PATH")
		}
		a := newProxyAVFS(t).with("PATH=" + filepath.Dir(python) + ":/usr/bin:/bin")
		r := a.proxy(nil, "python3", "-c", "import urllib.request; urllib.request.urlopen('http://avfs-test.invalid/', timeout=5)")
		r.want(t, wire.AllowWithCheckpoint, 1)
		// Nothing python runs fetches under approval: the hint has no
		// command, and says what it would take.
		if h := r.networkOff(t); h.Command != "" || strings.Contains(h.Message, "Fetch what") {
			t.Fatalf("hint %+v", h)
		}
	})
}

// TestProxyNoHint: a failure without a sign of the network, a run that has
// the host's network (approved, or without a sandbox) and a run that
// succeeds get no hint.
func TestProxyNoHint(t *testing.T) {
	t.Parallel()
	// The text Go's resolver prints when the network is missing.
	const symptom = `echo "dial tcp: lookup proxy.golang.org on 10.0.0.53:53: connect: network is unreachable" >&2`
	a := newProxyAVFS(t)
	t.Run("the symptom in a sandbox", func(t *testing.T) {
		r := a.on(t).proxy(nil, "sh", "-c", symptom+"; exit 1")
		r.want(t, wire.AllowWithCheckpoint, 1)
		if h := r.networkOff(t); h.Command != "" {
			t.Fatalf("a script of sh and echo has no fetch: %+v", h)
		}
	})
	t.Run("a failure without the symptom", func(t *testing.T) {
		r := a.on(t).proxy(nil, "sh", "-c", "echo 'main.go:3:1: syntax error' >&2; exit 1")
		r.want(t, wire.AllowWithCheckpoint, 1)
		r.noHints(t)
	})
	t.Run("success", func(t *testing.T) {
		r := a.on(t).proxy(nil, "sh", "-c", symptom)
		r.exits(t, 0)
		r.noHints(t)
	})
	t.Run("without a sandbox", func(t *testing.T) {
		r := a.on(t).proxy([]string{"--sandbox", "none", "--allow-writable-trust"}, "sh", "-c", symptom+"; exit 1")
		r.want(t, wire.AllowWithCheckpoint, 1)
		if r.env.Sandbox == nil || r.env.Sandbox.Mode != wire.SandboxNone {
			t.Fatalf("sandbox %+v", r.env.Sandbox)
		}
		r.noHints(t)
	})
	t.Run("approved with the network", func(t *testing.T) {
		// curl makes the script a network run: approved, it has the host's
		// network, whatever it prints.
		argv := []string{"sh", "-c", "curl --version >/dev/null; " + symptom + "; exit 6"}
		r := a.on(t).proxy(nil, argv...)
		r.want(t, wire.RequireApproval, wire.ExitNotRun)
		a.on(t).ok("approval", "grant", r.env.Approval.ID)
		r = a.on(t).proxy([]string{"--approval", r.env.Approval.ID}, argv...)
		r.want(t, wire.RequireApproval, 6)
		if r.env.Sandbox == nil || r.env.Sandbox.Mode != wire.SandboxNamespaces || r.env.Sandbox.Network != wire.NetworkHost {
			t.Fatalf("sandbox %+v", r.env.Sandbox)
		}
		r.noHints(t)
	})
}

// TestProxyNpxLocalBin: npx of a program already in the vault's
// node_modules/.bin runs it without approval (and without the network);
// npx of anything else, or with an option that may fetch, needs approval.
func TestProxyNpxLocalBin(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.ok("mkdir", "-p", "/web/node_modules/.bin", "/web/node_modules/hello-lint", "/web/src")
	a.write("#!/bin/sh\necho \"local lint $*\"\n", "/web/node_modules/hello-lint/cli.sh")
	a.ok("chmod", "755", "/web/node_modules/hello-lint/cli.sh")
	a.ok("ln", "-s", "../hello-lint/cli.sh", "/web/node_modules/.bin/hello-lint") // as npm links a package's bin
	a.ok("ln", "-s", "/web/node_modules/hello-lint/cli.sh", "/web/node_modules/.bin/abs-lint")

	r := a.proxy([]string{"--cwd", "/web/src"}, "npx", "hello-lint", "--fix", ".")
	if r.env.Decision != wire.AllowWithCheckpoint || slices.Contains(reasonIDsOf(r.env), "avfs.approval.network") {
		t.Fatalf("npx of a local program: %s", r.raw)
	}
	if _, err := exec.LookPath("npx"); err == nil {
		r.exits(t, 0)
		equal(t, "npx ran the local program", r.stdout(t), "local lint --fix .\n")
		if r.env.Sandbox.Network != wire.NetworkNone {
			t.Fatalf("sandbox %+v", r.env.Sandbox)
		}
	}
	var eval wire.PolicyResult
	a.into(&eval, "policy", "eval", "--cwd", "/web/src", "--shell", "npm exec hello-lint")
	if eval.Decision != wire.AllowWithCheckpoint {
		t.Fatalf("policy eval of npm exec of a local program: %+v", eval)
	}
	for _, c := range []struct {
		cwd  string
		argv []string
	}{
		{"/web/src", []string{"npx", "other-tool"}},
		{"/web/src", []string{"npx", "-y", "hello-lint"}},
		{"/web/src", []string{"npx", "hello-lint@2"}},
		{"/web/src", []string{"npx", "abs-lint"}}, // its link means another file in the sandbox's view
		{"/", []string{"npx", "hello-lint"}},      // not installed here or above
		{"/web", []string{"npm", "exec", "--package", "hello-lint", "--", "hello-lint"}},
	} {
		r := a.proxy([]string{"--cwd", c.cwd}, c.argv...)
		r.want(t, wire.RequireApproval, wire.ExitNotRun)
	}
}
