package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

// TestSandboxUnprivileged: a user who is not root gets the same sandbox,
// built in an unprivileged user namespace: the user's own uid inside,
// no capability, the view as for root.
func TestSandboxUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to become another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is missing")
	}
	const uid = "4242"
	dir, err := os.MkdirTemp("", "avfs-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o700)
	os.Chown(home, 4242, 4242)
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(setpriv, append([]string{"--reuid", uid, "--regid", uid, "--clear-groups", avfsBin}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "AVFS_HOME=" + filepath.Join(home, ".avfs")}
		cmd.Dir = home
		out, _ := cmd.Output()
		return out
	}
	script := "id -u; grep -E '^CapEff' /proc/self/status; echo written > w; test -e /etc/shadow || echo no-shadow\n"
	cmd := exec.Command(setpriv, "--reuid", uid, "--regid", uid, "--clear-groups", avfsBin, "write", "/s.sh")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "AVFS_HOME=" + filepath.Join(home, ".avfs")}
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("write: %v %s", err, out)
	}
	out := run("--json", "proxy", "exec", "--sandbox", "namespaces", "--mount-mode", "materialize", "--", "sh", "s.sh")
	var env wire.Envelope
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if env.Error != nil || env.Process == nil || env.Sandbox == nil || env.Sandbox.Mode != wire.SandboxNamespaces {
		t.Fatalf("unprivileged run: %s", out)
	}
	if got := env.Process.Stdout; got != uid+"\nCapEff:\t0000000000000000\nno-shadow\n" {
		t.Fatalf("inside: %q (stderr %q)", got, env.Process.Stderr)
	}
}

// TestSandboxStdin: --stdin reaches a sandboxed command through its init.
func TestSandboxStdin(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	r := a.exec([]byte("piped in\n"), proxyArgs([]string{"--stdin"}, "cat")...)
	var env wire.Envelope
	if err := json.Unmarshal(r.stdout, &env); err != nil || env.Process == nil || env.Sandbox == nil || env.Sandbox.Mode != wire.SandboxNamespaces {
		t.Fatalf("--stdin: %v %s", err, r.stdout)
	}
	if env.Process.Stdout != "piped in\n" {
		t.Fatalf("stdout %q", env.Process.Stdout)
	}
}

// TestSandboxToolchainInHome: a directory of the user's home on the PATH
// (pyenv's shims, ~/.cargo/bin) is shown in the sandbox's otherwise empty
// home, read-only, and its programs run; the rest of the home is not.
func TestSandboxToolchainInHome(t *testing.T) {
	t.Parallel()
	home, err := os.UserHomeDir()
	if err != nil || home == "/" || strings.HasPrefix(home, "/tmp") {
		t.Skip("no home of its own to put a toolchain in")
	}
	root, err := os.MkdirTemp(home, ".avfs-test-tool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	bin := filepath.Join(root, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "avfs-test-tool"), []byte("#!/bin/sh\necho tool ran\n"), 0o755)
	os.WriteFile(filepath.Join(root, "secret"), []byte("beside the toolchain\n"), 0o600)
	a := newProxyAVFS(t).with("PATH=" + bin + ":/usr/bin:/bin")
	a.write("avfs-test-tool; touch "+bin+"/x 2>/dev/null || echo read-only; cat "+root+"/secret 2>/dev/null || echo no-secret\n", "/t.sh")
	r := a.proxy(nil, "sh", "t.sh")
	r.ok(t, wire.AllowWithCheckpoint)
	equal(t, "inside", r.stdout(t), "tool ran\nread-only\nno-secret\n")
}
