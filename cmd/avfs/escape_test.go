package main

// Escape tests: a command that tries to reach the host from inside the
// sandbox of `avfs proxy exec`. They run under an allow-everything policy
// (testdata/allow-all), so that only the sandbox can stop the command:
// every case checks that the command ran (decision allow, a process,
// sandbox.mode namespaces) and that the target, planted on the host first,
// was not reached. The cases marked contrast also run with --sandbox none,
// where the same check must find the target reached: that shows the check
// can fail.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// testdataBundle is the absolute path of the bundle testdata/NAME.
func testdataBundle(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// allowAllFlags are the proxy exec flags that load only the bundle
// testdata/NAME, and hold the command in sandbox mode.
func allowAllFlags(t *testing.T, name, mode string) []string {
	flags := []string{"--bundle", testdataBundle(t, name), "--no-default-bundle", "--sandbox", mode}
	if mode == string(wire.SandboxNone) { // the bundle is the test's, writable by the command
		flags = append(flags, "--allow-writable-trust")
	}
	return flags
}

// heldRun runs `sh -c SCRIPT` under the policy of testdata/BUNDLE in
// sandbox mode and fails the test unless the command ran, allowed, in
// that mode.
func (a *avfs) heldRun(t *testing.T, bundle, mode, script string) proxyRun {
	t.Helper()
	r := a.on(t).proxy(allowAllFlags(t, bundle, mode), "sh", "-c", script)
	if r.env.Decision != wire.Allow || r.env.Process == nil || r.env.Error != nil {
		t.Fatalf("avfs %q: the command did not run, allowed: decision %s exit %d\n%s\nstderr: %s", r.args, r.env.Decision, r.code, r.raw, r.stderr)
	}
	if r.env.Sandbox == nil || string(r.env.Sandbox.Mode) != mode {
		t.Fatalf("avfs %q: sandbox %+v, want mode %s\n%s", r.args, r.env.Sandbox, mode, r.raw)
	}
	return r
}

// output is the command's stdout and stderr, decoded, one after the other.
func (r proxyRun) output(t *testing.T) string {
	t.Helper()
	p := r.env.Process
	stderr := p.Stderr
	if p.StderrEncoding == "base64" {
		stderr = "(stderr is base64: " + stderr + ")"
	}
	return r.stdout(t) + "\n" + stderr
}

// hostHome is the invoking user's home on the host (HOME, /root in CI).
func hostHome(t *testing.T) string {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return home
}

// currentUser is the name of the invoking user.
func currentUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// plant writes content to p on the host, removed when the test ends.
func plant(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
}

// absentOnHost returns an error if p exists on the host (and removes it).
func absentOnHost(t *testing.T, p string) error {
	if _, err := os.Lstat(p); err == nil {
		os.RemoveAll(p)
		return fmt.Errorf("%s appeared on the host", p)
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("%s on the host: %v", p, err)
	}
	return nil
}

// pendingConnection says whether a connection waits on l to be accepted
// (without waiting), and accepts it.
func pendingConnection(t *testing.T, l net.Listener) bool {
	t.Helper()
	sc, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ready bool
	if err := sc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		ready = err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0
	}); err != nil {
		t.Fatal(err)
	}
	if ready {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}
	return ready
}

// hostSleep starts `sleep MARKER` on the host, killed when the test ends.
func hostSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", marker())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// processState is the state letter of pid in /proc/PID/stat ("" when gone).
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok || rest == "" {
		return ""
	}
	return rest[:1]
}

// after is the text of out after the line MARK, up to the next line
// starting with "---".
func after(out, mark string) []string {
	_, rest, ok := strings.Cut(out, mark+"\n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(l, "---") {
			break
		}
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// procStatus is the value of field (e.g. "CapEff") in the /proc/PID/status
// text out, "" when missing.
func procStatus(out, field string) string {
	m := regexp.MustCompile(`(?m)^` + field + `:\s*(.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return strings.Join(strings.Fields(m[1]), " ")
}

// escapeCase is one attempt to reach the host from inside the sandbox.
type escapeCase struct {
	name string
	// contrast: the case also runs with --sandbox none, where held must
	// report the target reached.
	contrast bool
	// prepare plants the target on the host and returns the script to
	// run and the check: held returns nil when the target was not reached.
	prepare func(t *testing.T) (script string, held func(t *testing.T, r proxyRun, out string) error)
}

// escapeSecrets are the secrets in avfs's own environment.
func escapeSecrets(tok string) (aws, approver string) {
	return "aws-" + tok + "-s3cr3t", "approver-" + tok + "-key"
}

// escapeAVFS is avfs with secrets in its environment, another vault and
// an approver key file in its AVFS_HOME.
func escapeAVFS(t *testing.T, tok string) *avfs {
	t.Helper()
	requireFUSE(t)
	aws, approver := escapeSecrets(tok)
	a := newProxyAVFS(t).with("AWS_SECRET_ACCESS_KEY="+aws, "AVFS_APPROVER_KEY="+approver)
	a.ok("vault", "create", "other")
	a.write("vault-"+tok+"\n", "--vault", "other", "/secret.txt")
	if err := os.WriteFile(filepath.Join(a.home, "approver.key"), []byte("keyfile-"+tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"approval": {"key_file": "approver.key"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return a
}

// escapeCases are the attempts; a is the avfs they run with, tok a token
// unique to the test that every planted secret contains.
func escapeCases(a *avfs, tok string) []escapeCase {
	sq := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	notIn := func(out string, secrets ...string) error {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				return fmt.Errorf("the command read %q", s)
			}
		}
		return nil
	}
	return []escapeCase{
		{name: "home secret", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			name := ".avfs-escape-test-secret-" + tok
			p := filepath.Join(hostHome(t), name)
			plant(t, p, "home-"+tok+"\n")
			script := "cat " + sq(p) + "; echo rc=$?; cat ~/" + name + "; echo rc=$?; cat \"$HOME/" + name + "\"; echo rc=$?"
			return script, func(t *testing.T, r proxyRun, out string) error {
				if n := strings.Count(out, "rc=0"); n > 0 {
					return fmt.Errorf("%d of the 3 reads succeeded", n)
				}
				return notIn(out, "home-"+tok)
			}
		}},
		{name: "AVFS_HOME", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			script := "ls -la " + sq(a.home) + " " + sq(filepath.Join(a.home, "vaults")) + "; echo rc=$?; cat " +
				sq(filepath.Join(a.home, "approver.key")) + "; test -r " + sq(filepath.Join(a.home, "vaults", "other.avfs")) + " && echo vault-readable"
			return script, func(t *testing.T, r proxyRun, out string) error {
				if strings.Contains(out, "rc=0") || strings.Contains(out, "vault-readable") || strings.Contains(out, "other.avfs") || strings.Contains(out, "approver.key\n") {
					return fmt.Errorf("AVFS_HOME %s is listed", a.home)
				}
				return notIn(out, "keyfile-"+tok)
			}
		}},
		{name: "environment", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			script := "env; echo ---ppid; cat /proc/$PPID/environ | tr '\\0' '\\n'; echo ---init; cat /proc/1/environ | tr '\\0' '\\n'; " +
				"echo ---all; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done"
			return script, func(t *testing.T, r proxyRun, out string) error {
				aws, approver := escapeSecrets(tok)
				return notIn(out, aws, approver)
			}
		}},
		{name: "host tmp", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			dir, err := os.MkdirTemp("/tmp", "avfs-escape-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			plant(t, filepath.Join(dir, "secret"), "tmp-"+tok+"\n")
			out := "/tmp/avfs-escape-out-" + tok
			t.Cleanup(func() { os.Remove(out) })
			script := "ls " + sq(dir) + "; cat " + sq(filepath.Join(dir, "secret")) + "; echo inside-" + tok + " > " + out + " && cat " + out
			return script, func(t *testing.T, r proxyRun, o string) error {
				if err := notIn(o, "tmp-"+tok, "secret\n"); err != nil {
					return err
				}
				if !strings.Contains(o, "inside-"+tok) {
					t.Fatalf("writing the sandbox's /tmp failed: %s", o)
				}
				return absentOnHost(t, out)
			}
		}},
		{name: "etc", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			if _, err := os.Stat("/etc/shadow"); err != nil {
				t.Fatalf("the host has no /etc/shadow to hide: %v", err)
			}
			hostUsers := map[string]bool{}
			b, _ := os.ReadFile("/etc/passwd")
			for _, l := range strings.Split(string(b), "\n") {
				if name, _, ok := strings.Cut(l, ":"); ok {
					hostUsers[name] = true
				}
			}
			me := currentUser(t)
			var others []string
			for u := range hostUsers {
				if u != "root" && u != "nobody" && u != me {
					others = append(others, u)
				}
			}
			if len(others) == 0 {
				t.Fatal("the host's /etc/passwd has no user other than root, nobody and the user: nothing to hide")
			}
			script := "test -e /etc/shadow && echo shadow-present; ls /etc/sudoers /etc/ssh/ssh_host_* 2>/dev/null; echo ---passwd; cat /etc/passwd; echo ---"
			return script, func(t *testing.T, r proxyRun, out string) error {
				if strings.Contains(out, "shadow-present") || strings.Contains(out, "/etc/sudoers") || strings.Contains(out, "ssh_host_") {
					return fmt.Errorf("/etc/shadow, sudoers or a host key is there: %s", out)
				}
				users := after(out, "---passwd")
				if len(users) == 0 {
					t.Fatalf("no /etc/passwd inside: %s", out)
				}
				for _, l := range users {
					name, _, _ := strings.Cut(l, ":")
					if name != "root" && name != "nobody" && name != me {
						return fmt.Errorf("/etc/passwd lists %q (host users besides root, nobody, %s: %q)", name, me, others)
					}
				}
				return nil
			}
		}},
		{name: "loopback", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			port := l.Addr().(*net.TCPAddr).Port
			script := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo connected", port)
			return script, func(t *testing.T, r proxyRun, out string) error {
				pending := pendingConnection(t, l)
				if strings.Contains(out, "connected") || pending {
					return fmt.Errorf("the host's 127.0.0.1:%d was reached (pending connection %v): %s", port, pending, out)
				}
				return nil
			}
		}},
		{name: "host process", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			pid := hostSleep(t).Process.Pid
			// PTRACE_ATTACH (16) of the host's process, and of the run's own init.
			ptrace := `python3 -c "import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); print('ptrace=%d,%d' % (l.ptrace(16, int(sys.argv[1]), 0, 0), l.ptrace(16, 1, 0, 0)))" `
			script := fmt.Sprintf("kill -9 %d; echo kill=$?; test -e /proc/%d && echo visible; echo pids: $(ls /proc | grep -cE '^[0-9]+$'); %s%d", pid, pid, ptrace, pid)
			return script, func(t *testing.T, r proxyRun, out string) error {
				if !regexp.MustCompile(`kill=[1-9]`).MatchString(out) {
					return fmt.Errorf("kill -9 %d succeeded: %s", pid, out)
				}
				if !strings.Contains(out, "ptrace=-1,-1") {
					return fmt.Errorf("ptrace attached to the host's process or to the sandbox's init: %s", out)
				}
				if st := processState(pid); st == "" || st == "Z" || st == "X" {
					return fmt.Errorf("the host's sleep %d is gone (state %q)", pid, st)
				}
				if strings.Contains(out, "visible") {
					return fmt.Errorf("/proc/%d is visible", pid)
				}
				m := regexp.MustCompile(`pids: (\d+)`).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no pid count: %s", out)
				}
				if n, _ := strconv.Atoi(m[1]); n > 10 {
					return fmt.Errorf("/proc lists %d processes", n)
				}
				return nil
			}
		}},
		{name: "write host paths", prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			home := filepath.Join(hostHome(t), "escape-test-"+tok)
			paths := []string{"/usr/local/escape-test-" + tok, "/etc/escape-test-" + tok, "/var/tmp/escape-test-" + tok, avfsBin + ".escape-" + tok}
			for _, p := range append(paths, home) {
				t.Cleanup(func() { os.RemoveAll(p) })
			}
			before, err := os.Stat(avfsBin)
			if err != nil {
				t.Fatal(err)
			}
			var script strings.Builder
			for _, p := range paths {
				fmt.Fprintf(&script, "echo x > %s && echo wrote %s; ", sq(p), p)
			}
			fmt.Fprintf(&script, "true >> %s && echo opened the binary; ", sq(avfsBin))
			fmt.Fprintf(&script, "echo home > %s && cat %s", sq(home), sq(home))
			return script.String(), func(t *testing.T, r proxyRun, out string) error {
				if strings.Contains(out, "wrote ") || strings.Contains(out, "opened the binary") {
					return fmt.Errorf("a host path was written: %s", out)
				}
				if !strings.Contains(out, "home\n") {
					t.Fatalf("writing the sandbox's home failed: %s", out)
				}
				for _, p := range append(paths, home) {
					if err := absentOnHost(t, p); err != nil {
						return err
					}
				}
				now, err := os.Stat(avfsBin)
				if err != nil || !now.ModTime().Equal(before.ModTime()) || now.Size() != before.Size() {
					return fmt.Errorf("the avfs binary changed: %v", err)
				}
				return nil
			}
		}},
		{name: "mount", prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			script := "mkdir -p /tmp/x; mount -t tmpfs none /tmp/x && echo mounted-1; unshare -m true && echo unshared-mount; " +
				"unshare -r sh -c 'mount -t tmpfs none /tmp/x && echo mounted-2; grep CapEff /proc/self/status'; " +
				"unshare -U sh -c 'mount -t tmpfs none /tmp/x && echo mounted-3'; echo mounts: $(grep -c ' /tmp/x ' /proc/self/mountinfo)"
			return script, func(t *testing.T, r proxyRun, out string) error {
				for _, s := range []string{"mounted-", "unshared-mount"} {
					if strings.Contains(out, s) {
						return fmt.Errorf("%s: %s", s, out)
					}
				}
				if !strings.Contains(out, "mounts: 0\n") {
					return fmt.Errorf("/tmp/x is a mount point: %s", out)
				}
				return nil
			}
		}},
		{name: "setuid", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			script := "cp /bin/cat ./suidcat && chmod 4755 ./suidcat && ls -l ./suidcat && ./suidcat /proc/self/status; rm -f ./suidcat"
			return script, func(t *testing.T, r proxyRun, out string) error {
				if !strings.Contains(out, "-rwsr-xr-x") {
					t.Fatalf("no setuid copy in the vault: %s", out)
				}
				uid := strconv.Itoa(os.Getuid())
				if got := procStatus(out, "Uid"); got != strings.Repeat(uid+" ", 3)+uid {
					return fmt.Errorf("Uid: %q, want %s four times", got, uid)
				}
				for _, f := range []string{"CapEff", "CapPrm", "CapAmb"} {
					if got := procStatus(out, f); got != "0000000000000000" {
						return fmt.Errorf("%s: %q", f, got)
					}
				}
				if got := procStatus(out, "NoNewPrivs"); got != "1" {
					return fmt.Errorf("NoNewPrivs: %q", got)
				}
				return nil
			}
		}},
		{name: "symlink out of the vault", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			secret := filepath.Join(hostHome(t), ".avfs-escape-test-link-"+tok)
			plant(t, secret, "linked-home-"+tok+"\n")
			dir, err := os.MkdirTemp("/tmp", "avfs-escape-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			plant(t, filepath.Join(dir, "secret"), "linked-tmp-"+tok+"\n")
			a.ok("rm", "-f", "/s-home", "/s-tmp")
			a.ok("ln", "-s", secret, "/s-home")
			a.ok("ln", "-s", filepath.Join(dir, "secret"), "/s-tmp")
			return "cat s-home; cat s-tmp", func(t *testing.T, r proxyRun, out string) error {
				return notIn(out, "linked-home-"+tok, "linked-tmp-"+tok)
			}
		}},
		{name: "devices", prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			allowed := []string{".", "..", "null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "ptmx", "fd", "stdin", "stdout", "stderr"}
			ents, err := os.ReadDir("/dev")
			if err != nil {
				t.Fatal(err)
			}
			var hostOnly []string
			for _, e := range ents {
				if !slices.Contains(allowed, e.Name()) {
					hostOnly = append(hostOnly, e.Name())
				}
			}
			if len(hostOnly) == 0 {
				t.Fatal("the host's /dev has nothing to hide")
			}
			script := "mknod /tmp/sda b 8 0 && echo made-node; mknod /tmp/null c 1 3 && echo made-node; ls -l /tmp; echo ---dev; ls -a /dev; echo ---"
			return script, func(t *testing.T, r proxyRun, out string) error {
				if strings.Contains(out, "made-node") {
					return fmt.Errorf("mknod succeeded: %s", out)
				}
				inside := after(out, "---dev")
				if len(inside) == 0 {
					t.Fatalf("no /dev listing: %s", out)
				}
				for _, name := range inside {
					if !slices.Contains(allowed, name) {
						return fmt.Errorf("/dev/%s is in the sandbox (only %q allowed)", name, allowed)
					}
				}
				return nil
			}
		}},
		{name: "init", contrast: true, prepare: func(t *testing.T) (string, func(*testing.T, proxyRun, string) error) {
			b, err := os.ReadFile("/proc/1/cmdline")
			if err != nil {
				t.Fatal(err)
			}
			host := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
			script := "echo ---init; tr '\\0' ' ' < /proc/1/cmdline; echo; echo ---; tr '\\0' '\\n' < /proc/1/environ"
			return script, func(t *testing.T, r proxyRun, out string) error {
				init := after(out, "---init")
				if len(init) != 1 {
					t.Fatalf("no /proc/1/cmdline: %s", out)
				}
				if strings.TrimSpace(init[0]) == host {
					return fmt.Errorf("/proc/1 is the host's init %q", host)
				}
				aws, approver := escapeSecrets(tok)
				return notIn(out, aws, approver)
			}
		}},
	}
}

// TestEscape runs every escape attempt in the sandbox: each must run and
// must not reach its target.
func TestEscape(t *testing.T) {
	t.Parallel()
	tok := marker()
	a := escapeAVFS(t, tok)
	for _, c := range escapeCases(a, tok) {
		t.Run(c.name, func(t *testing.T) {
			script, held := c.prepare(t)
			r := a.heldRun(t, "allow-all", string(wire.SandboxNamespaces), script)
			if r.env.Sandbox.Network != wire.NetworkNone || r.env.Sandbox.Workspace != "/workspace" {
				t.Errorf("sandbox %+v: want network none at /workspace", r.env.Sandbox)
			}
			out := r.output(t)
			if err := held(t, r, out); err != nil {
				t.Fatalf("escaped: %v\nscript: %s\noutput:\n%s", err, script, out)
			}
		})
	}
}

// TestEscapeWithoutSandbox runs the contrast cases with --sandbox none:
// there, each must reach its target, which shows the checks of TestEscape
// can fail.
func TestEscapeWithoutSandbox(t *testing.T) {
	t.Parallel()
	tok := marker()
	a := escapeAVFS(t, tok)
	for _, c := range escapeCases(a, tok) {
		if !c.contrast {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			script, held := c.prepare(t)
			r := a.heldRun(t, "allow-all", string(wire.SandboxNone), script)
			if r.env.Sandbox.Reason == "" {
				t.Errorf("sandbox none without a reason: %s", r.raw)
			}
			out := r.output(t)
			if err := held(t, r, out); err == nil {
				t.Fatalf("without a sandbox, the target was not reached: the check cannot fail\nscript: %s\noutput:\n%s", script, out)
			}
		})
	}
}

// TestEscapeNetworkGrant: with decision.sandbox.network "host", the
// command reaches the host's loopback, and the envelope says so.
func TestEscapeNetworkGrant(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	a := newProxyAVFS(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	r := a.heldRun(t, "allow-all-network", string(wire.SandboxNamespaces),
		fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo connected", port))
	if r.env.Sandbox.Network != wire.NetworkHost {
		t.Errorf("sandbox.network %q, want host (decision.sandbox.network is \"host\")\n%s", r.env.Sandbox.Network, r.raw)
	}
	pending := pendingConnection(t, l)
	if out := r.output(t); !strings.Contains(out, "connected") || !pending {
		t.Errorf("with the host network granted, 127.0.0.1:%d was not reached (pending connection %v): %s", port, pending, out)
	}
}
