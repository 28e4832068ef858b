package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

var testEnv = []string{"PATH=/usr/bin:/bin"}

// sh runs script with sh -c, with a short grace, and returns the result and
// how long Run took.
func sh(t *testing.T, script string, edit func(*ProcSpec)) (ProcResult, time.Duration) {
	t.Helper()
	spec := ProcSpec{Argv: []string{"sh", "-c", script}, Env: testEnv, KillGrace: 200 * time.Millisecond}
	if edit != nil {
		edit(&spec)
	}
	t0 := time.Now()
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run(%q): %v", script, err)
	}
	return res, time.Since(t0)
}

// pids parses the whitespace-separated numbers in b.
func pids(t *testing.T, b []byte) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("not a pid: %q in %q", f, b)
		}
		out = append(out, n)
	}
	return out
}

// assertGone checks that no process has pid (not even a zombie).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := unix.Kill(pid, 0); err != unix.ESRCH {
		state := "?"
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			state = string(b)
		}
		t.Errorf("pid %d still exists (kill: %v): %s", pid, err, state)
	}
}

// procState returns the state letter of pid in /proc, or 0.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	p, err := parseStat(pid, b)
	if err != nil {
		return 0
	}
	return p.state
}

// assertNoneLeft checks that no process has marker in its command line.
func assertNoneLeft(t *testing.T, marker string) {
	t.Helper()
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, n := range names {
		b, _ := os.ReadFile(n)
		if bytes.Contains(b, []byte(marker)) {
			t.Errorf("%s survives: %q", n, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 3", 3, ""},
		{"exit 255", 255, ""},
		{"false", 1, ""},
		{"kill -KILL $$", 137, "SIGKILL"},
		{"kill -TERM $$", 143, "SIGTERM"},
		{"kill -SEGV $$", 139, "SIGSEGV"},
	} {
		res, _ := sh(t, tc.script, nil)
		if res.ExitCode != tc.code || res.Signal != tc.signal || res.TimedOut || res.NotFound || len(res.Killed) != 0 {
			t.Errorf("%q: got %+v, want exit %d signal %q", tc.script, res, tc.code, tc.signal)
		}
	}
}

func TestMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv0, path, under string
		want               bool
	}{
		{"no-such-program-avfs", "/usr/bin:/bin", "", true},
		{"sh", "/usr/bin:/bin", "", false},
		{"no-such-program-avfs", "/usr/bin:bin", "", false}, // a relative entry: the run's directory decides
		{"no-such-program-avfs", "/usr/bin::/bin", "", false},
		{"no-such-program-avfs", "/usr/bin", "/mnt/x", false}, // PATH may point into --mountpoint
		{"./no-such-program-avfs", "/usr/bin", "", false},
		{"tool", dir, "", false}, // there but not executable: 126, the run says so
	} {
		if got := Missing(tc.argv0, []string{"PATH=" + tc.path}, tc.under); got != tc.want {
			t.Errorf("Missing(%q, PATH=%s, %q) = %v", tc.argv0, tc.path, tc.under, got)
		}
	}
}

func TestNotFound(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("noexec", "#!/bin/sh\necho hi\n", 0o644)
	write("badinterp", "#!/nonexistent/interpreter\n", 0o755)
	write("binary", "\x7fELF garbage", 0o755)
	write("mytool", "#!/bin/sh\necho mytool ran\n", 0o755)
	for _, tc := range []struct {
		argv   []string
		env    []string
		code   int
		stderr string // after "avfs: ARGV0: "
	}{
		{[]string{"no-such-program-avfs"}, testEnv, 127, "command not found"},
		{[]string{"/nonexistent/program"}, testEnv, 127, "no such file or directory"},
		{[]string{filepath.Join(dir, "noexec")}, testEnv, 126, "permission denied"},
		{[]string{"noexec"}, []string{"PATH=" + dir}, 126, "permission denied"},
		{[]string{dir}, testEnv, 126, "is a directory"},
		{[]string{filepath.Join(dir, "badinterp")}, testEnv, 126, "bad interpreter: the program its #! line names is not there"},
		{[]string{"./binary"}, testEnv, 126, "exec format error"},
		{[]string{"sh", "-c", "true"}, []string{"PATH=/nonexistent"}, 127, "command not found"}, // not avfs's PATH
		{[]string{"mytool"}, testEnv, 127, "command not found"},
		{[]string{"mytool"}, []string{"PATH=/usr/bin:" + dir}, 0, ""}, // the given PATH
		{[]string{"./mytool"}, nil, 0, ""},                            // relative to Dir
	} {
		res, err := Run(context.Background(), ProcSpec{Argv: tc.argv, Env: tc.env, Dir: dir})
		if err != nil {
			t.Errorf("%v: %v", tc.argv, err)
			continue
		}
		if res.ExitCode != tc.code || res.NotFound != (tc.code != 0) {
			t.Errorf("%v with %v: got %+v, want exit %d", tc.argv, tc.env, res, tc.code)
		}
		if want := "avfs: " + tc.argv[0] + ": " + tc.stderr + "\n"; tc.code != 0 && string(res.Stderr.Bytes()) != want {
			t.Errorf("%v: stderr %q, want %q", tc.argv, res.Stderr.Bytes(), want)
		}
		if tc.code == 0 && string(res.Stdout.Bytes()) != "mytool ran\n" {
			t.Errorf("%v: stdout %q", tc.argv, res.Stdout.Bytes())
		}
	}
}

func TestInvalidSpec(t *testing.T) {
	for _, spec := range []ProcSpec{
		{},
		{Argv: []string{""}},
		{Argv: []string{"true"}, Dir: "/nonexistent/dir"},
		{Argv: []string{"true"}, Timeout: -1},
		{Argv: []string{"echo", "a\x00b"}},
	} {
		res, err := Run(context.Background(), spec)
		if !wire.HasCode(err, wire.CodeInvalidInput) || res.ExitCode != -1 {
			t.Errorf("%+v: got %+v, %v; want invalid_input", spec, res, err)
		}
	}
}

func TestOutputSmall(t *testing.T) {
	res, _ := sh(t, `printf 'out 1\nout 2'; printf 'err\n' >&2; exit 4`, nil)
	if res.ExitCode != 4 {
		t.Errorf("exit %d", res.ExitCode)
	}
	for _, c := range []struct {
		o    Output
		want string
	}{{res.Stdout, "out 1\nout 2"}, {res.Stderr, "err\n"}} {
		if string(c.o.Head) != c.want || len(c.o.Tail) != 0 || c.o.Truncated || c.o.Total != int64(len(c.want)) {
			t.Errorf("got %+v, want %q", c.o, c.want)
		}
	}
}

func TestOutputBinary(t *testing.T) {
	data := make([]byte, 256*3)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := sh(t, `cat "$1"; cat "$1" >&2`, func(s *ProcSpec) { s.Argv = append(s.Argv, "sh", f) })
	if !bytes.Equal(res.Stdout.Bytes(), data) || res.Stdout.Truncated {
		t.Errorf("stdout differs: %d bytes", len(res.Stdout.Bytes()))
	}
	// Cut in the middle: head and tail of the bytes, exact.
	res, _ = sh(t, `cat "$1"`, func(s *ProcSpec) { s.Argv = append(s.Argv, "sh", f); s.MaxOutput = 101 })
	o := res.Stdout
	if !o.Truncated || o.Total != int64(len(data)) || !bytes.Equal(o.Head, data[:50]) || !bytes.Equal(o.Tail, data[len(data)-51:]) {
		t.Errorf("got head %d tail %d total %d truncated %v", len(o.Head), len(o.Tail), o.Total, o.Truncated)
	}
}

func TestCapture(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i % 251)
	}
	for _, tc := range []struct {
		max    int64
		n      int // bytes written
		chunks []int
	}{
		{10, 0, []int{1}},
		{10, 10, []int{3}},
		{10, 11, []int{3}},
		{10, 1000, []int{1}},
		{10, 1000, []int{7}},
		{10, 1000, []int{1000}},
		{100, 1000, []int{33, 1, 64}},
		{1, 5, []int{2}},
		{101, 999, []int{50, 51, 200}},
	} {
		c := newCapture(tc.max)
		for off, i := 0, 0; off < tc.n; i++ {
			k := min(tc.chunks[i%len(tc.chunks)], tc.n-off)
			c.Write(data[off : off+k])
			off += k
		}
		o := c.output()
		in := data[:tc.n]
		if int64(tc.n) <= tc.max {
			if !bytes.Equal(o.Head, in) || len(o.Tail) != 0 || o.Truncated {
				t.Errorf("%+v: got %+v", tc, o)
			}
			continue
		}
		h := int(tc.max / 2)
		if !bytes.Equal(o.Head, in[:h]) || !bytes.Equal(o.Tail, in[tc.n-(int(tc.max)-h):]) || !o.Truncated || o.Total != int64(tc.n) {
			t.Errorf("%+v: got head %v tail %v", tc, o.Head, o.Tail)
		}
	}
}

func TestOutputFlood(t *testing.T) {
	const n = 50_000_000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	res, took := sh(t, `(yes e | head -c 50000000 >&2) & yes | head -c 50000000; wait`,
		func(s *ProcSpec) { s.MaxOutput = 64 << 10 })
	runtime.ReadMemStats(&m1)
	for _, o := range []Output{res.Stdout, res.Stderr} {
		if o.Total != n || !o.Truncated || len(o.Head) != 32<<10 || len(o.Tail) != 32<<10 {
			t.Errorf("total %d truncated %v head %d tail %d", o.Total, o.Truncated, len(o.Head), len(o.Tail))
		}
	}
	if !bytes.HasPrefix(res.Stdout.Head, []byte("y\ny\n")) || !bytes.HasSuffix(res.Stdout.Tail, []byte("y\ny\n")) ||
		!bytes.HasPrefix(res.Stderr.Tail, []byte("e\ne\n")) {
		t.Errorf("content: %q… %q…", res.Stdout.Head[:8], res.Stderr.Tail[:8])
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 16<<20 {
		t.Errorf("allocated %d MiB for 2×%d MB of output", alloc>>20, n/1_000_000)
	}
	t.Logf("100 MB in %v", took)
}

func TestTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		signal       string
		min, max     time.Duration
	}{
		{"sleep", "sleep 30", "SIGTERM", 200 * time.Millisecond, 2 * time.Second},
		// sh and sleep both ignore SIGTERM: SIGKILL after the grace.
		{"trap TERM", "trap '' TERM; sleep 30", "SIGKILL", 400 * time.Millisecond, 3 * time.Second},
		{"trap TERM in a loop", "trap '' TERM; while :; do sleep 0.05; done", "SIGKILL", 400 * time.Millisecond, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, took := sh(t, tc.script, func(s *ProcSpec) { s.Timeout = 200 * time.Millisecond })
			if !res.TimedOut || res.Signal != tc.signal || res.ExitCode != 128+int(unix.SignalNum(tc.signal)) {
				t.Errorf("got %+v, want timeout by %s", res, tc.signal)
			}
			if took < tc.min || took > tc.max || res.Duration > took {
				t.Errorf("took %v (duration %v), want %v..%v", took, res.Duration, tc.min, tc.max)
			}
		})
	}
}

// Descendants that leave the process group or session, double-fork, ignore
// SIGTERM, stop, or hold the output pipes are all ended, whether the command
// exits by itself or times out. Each script prints the pids to check on
// stderr and runs "sleep 30.NNN" with a marker found in no other process.
func TestEscapees(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		timeout      time.Duration
		maxTook      time.Duration
	}{
		{"background child", `sleep 30.101 & echo $! >&2`, 0, 3 * time.Second},
		{"grandchild holding stdout", `sh -c 'sleep 30.102 & echo $! >&2'; echo leader done`, 0, 3 * time.Second},
		{"double fork", `( (sleep 30.103 & echo $! >&2; echo x) & ) | read x`, 0, 3 * time.Second},
		{"setsid", `setsid sleep 30.104 & echo $! >&2`, 0, 3 * time.Second},
		{"setsid double fork", `setsid sh -c '(sleep 30.105 & echo $! >&2; echo x) &' | read x`, 0, 3 * time.Second},
		{"setsid ignoring TERM", `(setsid sh -c 'trap "" TERM; echo $$ >&2; echo x; exec sleep 30.106 >/dev/null' &) | read x`, 0, 3 * time.Second},
		{"stopped", `sleep 30.107 & echo $! >&2; kill -STOP $!`, 0, 3 * time.Second},
		{"timeout with escapees", `setsid sleep 30.108 & echo $! >&2; ( (trap '' TERM; sleep 30.109 & echo $! >&2; echo x) & ) | read x; sleep 30.110`,
			200 * time.Millisecond, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, took := sh(t, tc.script, func(s *ProcSpec) { s.Timeout = tc.timeout })
			want := pids(t, res.Stderr.Bytes())
			if len(want) == 0 {
				t.Fatalf("no pids on stderr: %+v", res)
			}
			if took > tc.maxTook {
				t.Errorf("took %v", took)
			}
			if res.TimedOut != (tc.timeout > 0) || (tc.timeout == 0 && res.ExitCode != 0) {
				t.Errorf("got %+v", res)
			}
			for _, pid := range want {
				if !slices.Contains(res.Killed, pid) {
					t.Errorf("pid %d not in Killed %v", pid, res.Killed)
				}
				assertGone(t, pid)
			}
			assertNoneLeft(t, "sleep\x0030.1")
		})
	}
}

// A stopped leftover gets SIGCONT with its SIGTERM, so it ends without
// waiting for the grace period.
func TestStoppedEndsOnTerm(t *testing.T) {
	res, took := sh(t, `sleep 30 & echo $! >&2; kill -STOP $!`, func(s *ProcSpec) { s.KillGrace = 5 * time.Second })
	if took > 2*time.Second || len(res.Killed) != 1 {
		t.Errorf("took %v, killed %v", took, res.Killed)
	}
	for _, pid := range pids(t, res.Stderr.Bytes()) {
		assertGone(t, pid)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	t0 := time.Now()
	res, err := Run(ctx, ProcSpec{Argv: []string{"sh", "-c", "sleep 30 & echo $! >&2; wait"}, Env: testEnv, KillGrace: 200 * time.Millisecond})
	took := time.Since(t0)
	if err != nil || res.TimedOut || res.Signal != "SIGTERM" || res.ExitCode != 143 || took > 2*time.Second {
		t.Errorf("got %+v, %v after %v", res, err, took)
	}
	for _, pid := range pids(t, res.Stderr.Bytes()) {
		assertGone(t, pid)
	}
	// Cancelled before it starts: not started.
	if _, err := Run(ctx, ProcSpec{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestSignal(t *testing.T) {
	pr, pw := io.Pipe()
	p := startTrapping(t, context.Background(), pr, pw)
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 7 || string(res.Stdout.Bytes()) != "ready\ngot INT\n" || res.TimedOut {
		t.Errorf("got %+v, %v", res, err)
	}
	if err := p.Signal(syscall.SIGINT); err != os.ErrProcessDone {
		t.Errorf("signal after the end: %v", err)
	}
	pw.Close()
}

// syncBuffer is a bytes.Buffer that the race detector would catch if it
// were written from two goroutines at once.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	if !s.mu.TryLock() {
		panic("concurrent writes")
	}
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, errors.New("broken") }

type blockWriter struct{ release chan struct{} }

func (w blockWriter) Write(p []byte) (int, error) { <-w.release; return len(p), nil }

func TestLiveCopy(t *testing.T) {
	// The writers below keep up, but under -race on a busy machine they may
	// need longer than the default wait; a Write still running when Run
	// returns would race with the checks.
	defer func(d time.Duration) { teeWait = d }(teeWait)
	teeWait = time.Minute

	// Separate writers get their own stream; one writer for both gets both.
	var out, errb syncBuffer
	res, _ := sh(t, `echo one; echo two >&2; echo three`, func(s *ProcSpec) { s.Stdout, s.Stderr = &out, &errb })
	if out.b.String() != "one\nthree\n" || errb.b.String() != "two\n" || string(res.Stdout.Bytes()) != "one\nthree\n" {
		t.Errorf("live %q %q, captured %q", out.b.String(), errb.b.String(), res.Stdout.Bytes())
	}
	var both syncBuffer
	res, _ = sh(t, `yes | head -c 3000000 & yes e | head -c 3000000 >&2; wait`,
		func(s *ProcSpec) { s.Stdout, s.Stderr = &both, &both })
	if int64(both.b.Len())+res.Stdout.LiveDropped+res.Stderr.LiveDropped != 6000000 {
		t.Errorf("live %d + dropped %d+%d", both.b.Len(), res.Stdout.LiveDropped, res.Stderr.LiveDropped)
	}

	// A failing writer drops everything; the capture is whole.
	res, _ = sh(t, `echo hello`, func(s *ProcSpec) { s.Stdout = failWriter{} })
	if res.Stdout.LiveDropped != 6 || string(res.Stdout.Bytes()) != "hello\n" {
		t.Errorf("failing writer: %+v", res.Stdout)
	}

	// A writer that blocks never blocks the command nor Run.
	teeWait = 100 * time.Millisecond
	w := blockWriter{make(chan struct{})}
	defer close(w.release)
	res, took := sh(t, `head -c 20000000 /dev/zero`, func(s *ProcSpec) { s.Stdout = w })
	if res.Stdout.Total != 20000000 || res.Stdout.LiveDropped < 20000000-(teeQueue+1)*64<<10 || took > 3*time.Second {
		t.Errorf("blocked writer: %+v after %v", res.Stdout, took)
	}
}

func TestStdin(t *testing.T) {
	// nil: /dev/null, EOF at once.
	res, took := sh(t, `cat; echo "rc=$?"`, nil)
	if string(res.Stdout.Bytes()) != "rc=0\n" || took > 2*time.Second {
		t.Errorf("nil stdin: %q after %v", res.Stdout.Bytes(), took)
	}
	res, _ = sh(t, `read x; echo "[$x]"; cat`, func(s *ProcSpec) { s.Stdin = strings.NewReader("hello\nworld\n") })
	if string(res.Stdout.Bytes()) != "[hello]\nworld\n" {
		t.Errorf("reader stdin: %q", res.Stdout.Bytes())
	}
	// A reader that never returns does not hold Run up.
	pr, pw := io.Pipe()
	defer pw.Close()
	res, took = sh(t, `echo hi`, func(s *ProcSpec) { s.Stdin = pr })
	if string(res.Stdout.Bytes()) != "hi\n" || took > 2*time.Second {
		t.Errorf("blocking stdin: %q after %v", res.Stdout.Bytes(), took)
	}
}

// The command leads its own session and process group.
func TestSession(t *testing.T) {
	res, _ := sh(t, `echo $$; cut -d' ' -f5,6 /proc/$$/stat`, nil)
	f := pids(t, res.Stdout.Bytes())
	if len(f) != 3 || f[1] != f[0] || f[2] != f[0] {
		t.Errorf("pid, pgid, sid: %v", f)
	}
}

func TestEnvAndDir(t *testing.T) {
	t.Setenv("AVFS_RUNNER_LEAK", "1")
	env := []string{"PATH=/usr/bin:/bin", "FOO=bar baz", "EMPTY="}
	res, err := Run(context.Background(), ProcSpec{Argv: []string{"env"}, Env: env})
	if err != nil || string(res.Stdout.Bytes()) != strings.Join(env, "\n")+"\n" {
		t.Errorf("env: %q, %v", res.Stdout.Bytes(), err)
	}
	res, err = Run(context.Background(), ProcSpec{Argv: []string{"/usr/bin/env"}})
	if err != nil || len(res.Stdout.Bytes()) != 0 {
		t.Errorf("nil env: %q, %v", res.Stdout.Bytes(), err)
	}
	dir := t.TempDir()
	res, _ = sh(t, `pwd -P`, func(s *ProcSpec) { s.Dir = dir })
	want, _ := filepath.EvalSymlinks(dir)
	if strings.TrimSpace(string(res.Stdout.Bytes())) != want {
		t.Errorf("pwd %q, want %q", res.Stdout.Bytes(), want)
	}
}

// The caller's own children are never signalled nor reaped, nor are their
// own children: one started in a new session just before the command
// (possibly in the same clock tick), one started while it runs in its own
// group in avfs's session, and one started in a new session while it runs
// and passed in Exclude.
func TestCallerChildren(t *testing.T) {
	before := exec.Command("sleep", "5")
	before.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := before.Start(); err != nil {
		t.Fatal(err)
	}
	var excluded sync.Map
	p, err := Start(context.Background(), ProcSpec{
		Argv:      []string{"sh", "-c", `( (sleep 30 & echo $! >&2) & ); setsid sleep 30 & echo $! >&2; sleep 0.3`},
		Env:       testEnv,
		KillGrace: 200 * time.Millisecond,
		Exclude:   func(pid int) bool { _, ok := excluded.Load(pid); return ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	during := exec.Command("sh", "-c", "sleep 5 & exec sleep 5")
	during.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // still in avfs's session
	if err := during.Start(); err != nil {
		t.Fatal(err)
	}
	session := exec.Command("sh", "-c", "sleep 5 & exec sleep 5")
	session.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	excluded.Store(session.Process.Pid, true)
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || len(res.Killed) != 2 {
		t.Errorf("got %+v, %v", res, err)
	}
	for _, pid := range pids(t, res.Stderr.Bytes()) {
		assertGone(t, pid)
	}
	for _, c := range []*exec.Cmd{before, during, session} {
		if s := procState(c.Process.Pid); s != 'S' && s != 'R' {
			t.Errorf("caller's child %d: state %q", c.Process.Pid, s)
		}
		unix.Kill(-c.Process.Pid, unix.SIGKILL) // with its own child
		// Still ours to wait for: not reaped by Run.
		if err := c.Wait(); err == nil || err.Error() != "signal: killed" {
			t.Errorf("caller's child %d: wait: %v", c.Process.Pid, err)
		}
	}
}

// Exclude cannot spare the command's own session and group (a caller may
// hold a stale pid that the command now has).
func TestExcludeNotTheCommand(t *testing.T) {
	var cmdPid atomic.Int64
	p, err := Start(context.Background(), ProcSpec{
		Argv:      []string{"sh", "-c", `sleep 0.1; sleep 30.201 & echo $! >&2`},
		Env:       testEnv,
		KillGrace: 200 * time.Millisecond,
		Exclude:   func(pid int) bool { return int64(pid) == cmdPid.Load() },
	})
	if err != nil {
		t.Fatal(err)
	}
	cmdPid.Store(int64(p.Pid()))
	res, err := p.Wait()
	got := pids(t, res.Stderr.Bytes())
	if err != nil || len(got) != 1 || !slices.Equal(res.Killed, got) {
		t.Errorf("got %+v, %v", res, err)
	}
	for _, pid := range got {
		assertGone(t, pid)
	}
}

// A process that holds the pipes but is excluded does not hold Run up
// beyond the drain bound.
func TestDrainBound(t *testing.T) {
	defer func(d time.Duration) { drainWait = d }(drainWait)
	drainWait = 300 * time.Millisecond
	isSleep := func(pid int) bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return string(b) == "sleep\x005\x00"
	}
	// The leader waits for its child to become "sleep", which Exclude spares.
	script := `setsid sleep 5 & until [ "$(cat /proc/$!/comm)" = sleep ]; do sleep 0.01; done; echo $!`
	res, took := sh(t, script, func(s *ProcSpec) { s.Exclude = isSleep })
	pid := pids(t, res.Stdout.Bytes())
	if len(pid) != 1 || len(res.Killed) != 0 || took > 2*time.Second || took < drainWait {
		t.Fatalf("got %+v after %v", res, took)
	}
	if s := procState(pid[0]); s != 'S' {
		t.Errorf("excluded process state %q", s)
	}
	// It was reparented to this process, which reaps it.
	unix.Kill(pid[0], unix.SIGKILL)
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid[0], &ws, 0, nil); err != nil {
		t.Errorf("wait4 %d: %v", pid[0], err)
	}
}

// One command at a time: Start waits for the running one.
func TestOneAtATime(t *testing.T) {
	p, err := Start(context.Background(), ProcSpec{Argv: []string{"sleep", "0.3"}, Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Start(ctx, ProcSpec{Argv: []string{"true"}, Env: testEnv}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Start: %v", err)
	}
	res, err := Run(context.Background(), ProcSpec{Argv: []string{"true"}, Env: testEnv})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("after: %+v, %v", res, err)
	}
	if res, _ := p.Wait(); res.ExitCode != 0 {
		t.Errorf("first: %+v", res)
	}
}

func TestParseStat(t *testing.T) {
	line := "123 (a) b (c)) S 1 123 120 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 4567 0 0\n"
	p, err := parseStat(123, []byte(line))
	if err != nil || p != (procInfo{pid: 123, ppid: 1, pgid: 123, sid: 120, start: 4567, state: 'S'}) {
		t.Errorf("got %+v, %v", p, err)
	}
	if _, err := parseStat(1, []byte("1 (x) S 1")); err == nil {
		t.Error("short line parsed")
	}
}

// With DirServed the command changes into Dir itself, and sees the same
// argv, environment, working directory and exit statuses as without.
func TestDirServed(t *testing.T) {
	dir := t.TempDir()
	real, _ := filepath.EvalSymlinks(dir)
	if err := os.WriteFile(filepath.Join(dir, "prog"), []byte("#!/bin/sh\necho \"${0##*/}|$1|$(pwd -P)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "noexec"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		argv []string
		env  []string
		out  string
		code int
	}{
		{"env exactly", []string{"env"}, []string{"PATH=/usr/bin:/bin", "X=it's"}, "PATH=/usr/bin:/bin\nX=it's\n", 0},
		{"PWD and OLDPWD kept", []string{"env"}, []string{"OLDPWD=/o ld", "PATH=/usr/bin:/bin", "PWD=/p'q"}, "OLDPWD=/o ld\nPATH=/usr/bin:/bin\nPWD=/p'q\n", 0},
		{"relative program in dir", []string{"./prog", "a b"}, testEnv, "prog|a b|" + real + "\n", 0},
		{"argv[0] kept", []string{"sh", "-c", `echo "$0 $(pwd -P)"`, "zero"}, testEnv, "zero " + real + "\n", 0},
		{"exit status", []string{"sh", "-c", "exit 7"}, testEnv, "", 7},
		{"not found", []string{"no-such-program-avfs"}, testEnv, "", 127},
		{"not executable", []string{"./noexec"}, testEnv, "", 126},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, served := range []bool{false, true} {
				res, err := Run(context.Background(), ProcSpec{Argv: tc.argv, Env: tc.env, Dir: dir, DirServed: served})
				if err != nil {
					t.Fatalf("served=%v: %v", served, err)
				}
				got := string(res.Stdout.Bytes())
				if tc.argv[0] == "env" { // the shell may reorder the environment
					lines := strings.SplitAfter(got, "\n")
					slices.Sort(lines)
					got = strings.Join(lines, "")
				}
				if got != tc.out || res.ExitCode != tc.code {
					t.Errorf("served=%v: exit %d, stdout %q; want %d, %q (stderr %q)", served, res.ExitCode, got, tc.code, tc.out, res.Stderr.Bytes())
				}
			}
		})
	}
}

// A context cancelled because avfs was interrupted sends the command that
// signal (Ctrl-C arrives as SIGINT); other cancellations send SIGTERM.
func TestCancelForwardsTheSignal(t *testing.T) {
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{Interrupted{Signal: syscall.SIGINT}, "INT"},
		{Interrupted{Signal: syscall.SIGTERM}, "TERM"},
		{errors.New("gone"), "TERM"},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		pr, pw := io.Pipe()
		p := startTrapping(t, ctx, pr, pw)
		cancel(tc.cause)
		res, err := p.Wait()
		wantInterrupted := ""
		if _, ok := tc.cause.(Interrupted); ok {
			wantInterrupted = "SIG" + tc.want
		}
		if want := "ready\ngot " + tc.want + "\n"; err != nil || string(res.Stdout.Bytes()) != want || res.TimedOut || res.Interrupted != wantInterrupted {
			t.Errorf("%v: got %+v, %v; want stdout %q", tc.cause, res, err, want)
		}
		pw.Close()
	}
}

// startTrapping starts a shell that prints "got INT" or "got TERM" and
// exits 7 or 8 on those signals, with a live copy of its stdout into pw,
// and returns once it is ready (pr is then drained in the background).
func startTrapping(t *testing.T, ctx context.Context, pr *io.PipeReader, pw *io.PipeWriter) *Proc {
	t.Helper()
	p, err := Start(ctx, ProcSpec{
		Argv:      []string{"sh", "-c", `trap 'echo got INT; exit 7' INT; trap 'echo got TERM; exit 8' TERM; echo ready; while :; do sleep 0.05; done`},
		Env:       testEnv,
		Stdout:    pw,
		KillGrace: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	go io.Copy(io.Discard, pr)
	return p
}
