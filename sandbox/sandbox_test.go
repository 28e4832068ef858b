package sandbox

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"avfs/wire"
)

// testSpec is a sandbox over a fresh workspace running script with sh.
func testSpec(t *testing.T, script string) Spec {
	t.Helper()
	run := t.TempDir()
	ws := filepath.Join(run, "ws")
	root := filepath.Join(run, "view")
	for _, d := range []string{ws, root} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	home, _ := os.UserHomeDir()
	return Spec{
		Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home},
		Dir: DefaultWorkspace, Root: root, Workspace: ws, WorkspaceAt: DefaultWorkspace,
		Home: home, HostHome: home, UID: os.Getuid(), GID: os.Getgid(), User: "root", Group: "root",
		GitName: "avfs", GitEmail: "avfs@localhost", TmpSize: 64 << 20, KillGrace: time.Second,
	}
}

type ran struct {
	stdout, stderr string
	res            Result
	landlock       int
}

func runSpec(t *testing.T, spec Spec) ran {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(exe, spec)
	if err != nil {
		t.Fatal(err)
	}
	return runProcess(t, p)
}

// runProcess starts p with its output kept and waits for it.
func runProcess(t *testing.T, p *Process) ran {
	t.Helper()
	var out, errb bytes.Buffer
	p.Cmd.Stdout, p.Cmd.Stderr = &out, &errb
	if err := p.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	_, _ = p.Wait()
	return ran{out.String(), errb.String(), p.Result(), p.Landlock}
}

// TestView runs commands in a sandbox and checks what they can see and do.
func TestView(t *testing.T) {
	pool := testPool(t)
	for _, c := range []struct {
		name, script, stdout string
		status               int
	}{
		{"cwd and workspace", `pwd; echo hi > /workspace/a; cat a`, "/workspace\nhi\n", 0},
		{"identity", `id -u`, "0\n", 0},
		{"no capabilities", `grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u`, "0000000000000000\n", 0},
		{"no new privileges", `grep NoNewPrivs /proc/self/status | awk '{print $2}'`, "1\n", 0},
		{"own pid namespace", `echo $$; tr '\0' ' ' < /proc/1/cmdline`, "2\navfs-sandbox ", 0},
		{"system read-only", `touch /usr/x 2>/dev/null || echo refused`, "refused\n", 0},
		{"etc read-only", `touch /etc/x 2>/dev/null || echo refused`, "refused\n", 0},
		{"root read-only", `mkdir /x 2>/dev/null || echo refused`, "refused\n", 0},
		{"no shadow", `test -e /etc/shadow || echo absent`, "absent\n", 0},
		{"passwd of the run", `cut -d: -f1 /etc/passwd | sort | tr '\n' ' '`, "nobody root ", 0},
		{"private tmp", `echo x > /tmp/f && cat /tmp/f`, "x\n", 0},
		{"workspace nosuid nodev", `awk '$5=="/workspace"{print $6}' /proc/self/mountinfo | tr , '\n' | grep -E '^no(suid|dev)$' | sort | tr '\n' ' '`, "nodev nosuid ", 0},
		{"workspace cannot be unmounted", `umount /workspace 2>/dev/null || echo refused`, "refused\n", 0},
		{"minimal dev", `ls /dev | tr '\n' ' '`, "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero ", 0},
		{"no mknod", `mknod /tmp/sda b 8 0 2>/dev/null || echo refused`, "refused\n", 0},
		{"no mount", `mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>/dev/null || echo refused`, "refused\n", 0},
		{"loopback only", `cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`, "lo\n", 0},
		// Without the grant, Landlock refuses TCP even on the run's own
		// loopback (ECONNREFUSED would mean it is not there).
		{"no TCP without the grant", `bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' 2>&1 | grep -q 'Permission denied' && echo refused`, "refused\n", 0},
		{"exit status", `exit 3`, "", 3},
		{"not found", `exec /nonexistent`, "", 127},
	} {
		// Each case runs in a sandbox built for it, and in one prepared
		// ahead by a pool: both must show the same.
		for _, how := range []string{"built", "prepared"} {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				var r ran
				if how == "built" {
					r = runSpec(t, testSpec(t, c.script))
				} else {
					r = runPrepared(t, pool, testSpec(t, c.script))
				}
				if !r.res.Reported || r.res.Status.ExitStatus() != c.status || r.stdout != c.stdout {
					t.Fatalf("got %q (stderr %q) status %d, want %q status %d", r.stdout, r.stderr, r.res.Status.ExitStatus(), c.stdout, c.status)
				}
			})
		}
	}
}

// TestLeftBehind: what the command leaves running is ended, and counted.
func TestLeftBehind(t *testing.T) {
	spec := testSpec(t, `sleep 100 & sleep 100 & (trap '' TERM; sleep 100) & echo started`)
	spec.KillGrace = 200 * time.Millisecond
	start := time.Now()
	r := runSpec(t, spec)
	if r.stdout != "started\n" || r.res.Ended != 3 || r.res.Status.ExitStatus() != 0 {
		t.Fatalf("got %+v", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}

// TestSignalEndsRun: a SIGTERM from outside reaches every process; one
// that ignores it is killed after the grace.
func TestSignalEndsRun(t *testing.T) {
	spec := testSpec(t, `trap '' TERM; sleep 100 & echo up; wait; echo never`)
	spec.KillGrace = 200 * time.Millisecond
	exe, _ := os.Executable()
	p, err := New(exe, spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "up\n" { // the trap is set
		t.Fatalf("read %q: %v", line, err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = p.Wait()
	res := p.Result()
	if !res.Reported || !res.Status.Signaled() || res.Status.Signal() != syscall.SIGKILL || res.Ended != 1 {
		t.Fatalf("got %+v (status %v)", res, res.Status)
	}
}

// TestSetupFailure: a view that cannot be built is a sandbox_unavailable
// error naming the step, and nothing runs.
func TestSetupFailure(t *testing.T) {
	spec := testSpec(t, `echo ran > /workspace/ran`)
	ws := spec.Workspace
	spec.Workspace = filepath.Join(ws, "missing")
	exe, _ := os.Executable()
	p, err := New(exe, spec)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start()
	if !wire.HasCode(err, wire.CodeSandbox) || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("the command ran")
	}
}

func TestProbe(t *testing.T) {
	exe, _ := os.Executable()
	if err := Probe(exe, t.TempDir(), wire.NetworkNone); err != nil {
		t.Fatal(err)
	}
	err := Probe(exe, filepath.Join(t.TempDir(), "missing"), wire.NetworkNone)
	if !wire.HasCode(err, wire.CodeSandbox) {
		t.Fatalf("a probe that cannot mount: %v", err)
	}
}

// TestPlanEtc: the view's /etc never shows the host's secrets.
func TestPlanEtc(t *testing.T) {
	for _, name := range etcFiles {
		for _, bad := range []string{"shadow", "gshadow", "sudoers", "ssh", "passwd", "group"} {
			if name == bad || strings.HasPrefix(name, bad+"-") {
				t.Errorf("etcFiles shows %s", name)
			}
		}
	}
	spec := testSpec(t, "true")
	spec.UID, spec.GID, spec.User, spec.Group = 1000, 1000, "alice", "staff"
	w := spec.etcWritten()
	if !strings.Contains(w["passwd"], "alice:x:1000:1000:alice:"+spec.Home+":") || strings.Count(w["passwd"], "\n") != 3 {
		t.Errorf("passwd %q", w["passwd"])
	}
	if !strings.Contains(w["gitconfig"], `name = "avfs"`) {
		t.Errorf("gitconfig %q", w["gitconfig"])
	}
}

func TestToolchains(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{".pyenv/shims", ".pyenv/versions/3.11/bin", ".cargo/bin", ".rustup", ".nvm/versions/node/v20/bin", "go/bin", "tools"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The test's home is under /tmp, scratch in a real view: this one
	// keeps only /dev, /proc and the home as scratch. Toolchains in the
	// home are shown: the home itself is empty.
	in := Input(wire.SandboxNamespaces, "", DefaultWorkspace, home)
	in.Scratch = []string{"/dev", "/proc", home}
	path := strings.Join([]string{home + "/.pyenv/shims", home + "/.pyenv/versions/3.11/bin", home + "/.cargo/bin",
		home + "/.nvm/versions/node/v20/bin", home + "/go/bin", "/usr/bin", "/workspace/bin", "relative", home + "/missing", home + "/tools"}, ":")
	got := Toolchains(path, home, in)
	want := []string{home + "/.pyenv", home + "/.cargo/bin", home + "/.rustup", home + "/.nvm/versions/node/v20", home + "/go/bin", home + "/tools"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestTrimCache(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep"), 0o644)
	for i, name := range []string{"old", "mid", "new"} {
		d := filepath.Join(dir, name, "sub")
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "f"), bytes.Repeat([]byte("x"), 1000), 0o444)
		os.Symlink(outside, filepath.Join(d, "link"))
		os.Chmod(d, 0o555) // Go's module cache is read-only
		when := time.Now().Add(time.Duration(i-3) * time.Hour)
		os.Chtimes(filepath.Join(d, "f"), when, when)
		os.Chtimes(d, when, when)
		os.Chtimes(filepath.Join(dir, name), when, when)
	}
	if err := TrimCache(dir, 2500); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"mid", "new"}) {
		t.Fatalf("left %v", names)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Fatalf("a symlink's target was touched: %q %v", b, err)
	}
	if err := ClearCache(dir); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("cleared cache holds %v", ents)
	}
}

// TestTrimCacheDue: a cache is measured at most every TrimEvery.
func TestTrimCacheDue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	os.MkdirAll(filepath.Join(dir, "go-build"), 0o755)
	big := filepath.Join(dir, "go-build", "f")
	now := time.Now()
	if err := TrimCacheDue(dir, 10, now); err != nil { // first run: measured, nothing over
		t.Fatal(err)
	}
	os.WriteFile(big, make([]byte, 100), 0o644)
	if err := TrimCacheDue(dir, 10, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(big); err != nil {
		t.Fatalf("trimmed before it was due: %v", err)
	}
	if err := TrimCacheDue(dir, 10, now.Add(TrimEvery+time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(big); !os.IsNotExist(err) {
		t.Fatalf("not trimmed when due: %v", err)
	}
}

// TestParentDeathEndsRun: when the process that started a sandbox dies
// (SIGKILL: nothing of it cleans up), the init and every process of the
// run end with it. The test binary starts the sandbox in a child copy of
// itself and kills that copy.
func TestParentDeathEndsRun(t *testing.T) {
	if os.Getenv("AVFS_SANDBOX_TEST_PARENT") == "1" {
		spec := testSpec(t, `sleep 4711 & echo up; wait`)
		exe, _ := os.Executable()
		p, err := New(exe, spec)
		if err != nil {
			t.Fatal(err)
		}
		p.Cmd.Stdout = os.Stdout
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("init " + strconv.Itoa(p.Pid()) + "\n")
		_, _ = p.Wait() // until killed
		return
	}
	exe, _ := os.Executable()
	parent := exec.Command(exe, "-test.run=^TestParentDeathEndsRun$", "-test.count=1")
	parent.Env = append(os.Environ(), "AVFS_SANDBOX_TEST_PARENT=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Wait()
	r := bufio.NewReader(out)
	var initPid int
	for initPid == 0 {
		line, err := r.ReadString('\n')
		if err != nil {
			parent.Process.Kill()
			t.Fatalf("the sandbox did not start: %v", err)
		}
		if s, ok := strings.CutPrefix(line, "init "); ok {
			initPid, _ = strconv.Atoi(strings.TrimSpace(s))
		}
	}
	for line := ""; line != "up\n"; {
		if line, err = r.ReadString('\n'); err != nil {
			t.Fatalf("the command did not start: %v", err)
		}
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	alive := func() []string {
		var left []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
				continue // gone, or a zombie: it ended
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if pid == initPid || bytes.Equal(cmdline, []byte("sleep\x004711\x00")) {
				left = append(left, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
		return left
	}
	// The kernel ends them asynchronously: wait (bounded) for it.
	for deadline := time.Now().Add(10 * time.Second); len(alive()) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run outlived the process that started it: %q", alive())
		}
	}
}
