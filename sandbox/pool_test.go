package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testPool is a pool of this test binary's sandboxes, closed with the test.
func testPool(t *testing.T) *Pool {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(exe, filepath.Join(t.TempDir(), "prepared"), 0)
	if pool.off != nil {
		t.Fatalf("the pool prepares nothing here: %v", pool.off)
	}
	t.Cleanup(pool.Close)
	return pool
}

// awaitPrepared waits until the pool holds a prepared sandbox for spec's
// view, asking for one first (as a run of that view does).
func awaitPrepared(t *testing.T, pool *Pool, spec Spec) *Process {
	t.Helper()
	key, err := spec.viewKey()
	if err != nil {
		t.Fatal(err)
	}
	pool.mu.Lock()
	if pool.views[key] == nil {
		pool.views[key] = &preparedView{spec: spec, used: time.Now()}
	}
	pool.mu.Unlock()
	pool.prepareLater(key)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		pool.mu.Lock()
		v := pool.views[key]
		ready, failed := v.ready, pool.stats.Failed
		pool.mu.Unlock()
		if ready != nil {
			return ready
		}
		if failed > 0 {
			t.Fatal("preparing failed")
		}
	}
	t.Fatal("nothing was prepared")
	return nil
}

// runPrepared runs spec in a sandbox the pool prepared for it.
func runPrepared(t *testing.T, pool *Pool, spec Spec) ran {
	t.Helper()
	awaitPrepared(t, pool, spec)
	taken := pool.Stats().Taken
	p, err := pool.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := pool.Stats().Taken; got != taken+1 {
		t.Fatalf("the run did not take the prepared sandbox (taken %d → %d)", taken, got)
	}
	return runProcess(t, p)
}

// TestPoolFiles: a prepared sandbox takes the command's streams as files
// (the runner's pipes) and the workspace of its own run; a second run of
// the same view gets another prepared sandbox, never the first's.
func TestPoolFiles(t *testing.T) {
	pool := testPool(t)
	var inits []int
	for i := range 2 {
		spec := testSpec(t, `touch /workspace/ran; cat; ls /workspace; echo err >&2`)
		if err := os.WriteFile(filepath.Join(spec.Workspace, "mine"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		awaitPrepared(t, pool, spec)
		p, err := pool.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(filepath.Join(spec.Workspace, "mine"))
		if err != nil {
			t.Fatal(err)
		}
		or, ow, _ := os.Pipe()
		er, ew, _ := os.Pipe()
		p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr = in, ow, ew
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		inits = append(inits, p.Pid())
		ow.Close()
		ew.Close()
		in.Close()
		var out, errb bytes.Buffer
		done := make(chan struct{})
		go func() { errb.ReadFrom(er); close(done) }()
		out.ReadFrom(or)
		<-done
		_, _ = p.Wait()
		if res := p.Result(); !res.Reported || res.Status.ExitStatus() != 0 {
			t.Fatalf("run %d: %+v", i, res)
		}
		if out.String() != "xmine\nran\n" || errb.String() != "err\n" {
			t.Fatalf("run %d: stdout %q stderr %q", i, out.String(), errb.String())
		}
		if _, err := os.Stat(p.root); err == nil {
			t.Errorf("run %d: the prepared root %s is still there", i, p.root)
		}
	}
	if st := pool.Stats(); st.Taken != 2 || st.Built != 0 || inits[0] == inits[1] {
		t.Fatalf("stats %+v, inits %v", st, inits)
	}
}

// TestPoolHoldsNoHostMount: a prepared sandbox waits with none of the
// host's mounts but those of its view: a copy of a run's FUSE mount would
// keep that file system alive after the run unmounted it.
func TestPoolHoldsNoHostMount(t *testing.T) {
	pool := testPool(t)
	host := filepath.Join(t.TempDir(), "host-mount")
	if err := os.Mkdir(host, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", host, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs (the tests run as root): %v", err)
	}
	defer syscall.Unmount(host, syscall.MNT_DETACH)
	prepared := awaitPrepared(t, pool, testSpec(t, "true"))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", prepared.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "host-mount") || !strings.Contains(string(b), " / / ") {
		t.Fatalf("the prepared sandbox's mounts:\n%s", b)
	}
}

// TestPoolWaitsForPreparation: a run that comes while its view's sandbox
// is being prepared (the last run just ended) takes it when it is ready,
// rather than building a second one beside it.
func TestPoolWaitsForPreparation(t *testing.T) {
	pool := testPool(t)
	pool.wait = 20 * time.Second // so that the test does not depend on the machine's speed
	pool.idle = 0
	spec := testSpec(t, `echo ran`)
	key, _ := spec.viewKey()
	pool.mu.Lock()
	pool.views[key] = &preparedView{spec: spec, used: time.Now()}
	pool.mu.Unlock()
	pool.prepareLater(key)
	r := runSpecWith(t, pool, spec)
	if r.stdout != "ran\n" {
		t.Fatalf("got %+v", r)
	}
	if st := pool.Stats(); st.Taken != 1 || st.Built != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPoolPreparesWhenQuiet: nothing is prepared while a run is under
// way, nor until avfs has been quiet for the pool's idle time.
func TestPoolPreparesWhenQuiet(t *testing.T) {
	pool := testPool(t)
	pool.idle = time.Hour
	spec := testSpec(t, `true`)
	key, _ := spec.viewKey()
	preparing := func() bool {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		return pool.views[key].preparing != nil || pool.views[key].ready != nil
	}
	release := pool.Busy()
	pool.mu.Lock()
	pool.views[key] = &preparedView{spec: spec, used: time.Now()}
	pool.mu.Unlock()
	pool.prepareLater(key)
	if preparing() {
		t.Fatal("prepared while a run was under way")
	}
	release()
	if preparing() {
		t.Fatal("prepared as soon as the run ended")
	}
	pool.mu.Lock()
	pool.idle = 0
	pool.wakeLocked()
	pool.mu.Unlock()
	if !preparing() {
		t.Fatal("not prepared once quiet")
	}
	awaitPrepared(t, pool, spec)
}

// TestPoolDifferentView: a run whose view differs from what was prepared
// (another network grant, another home file) gets a sandbox built for
// it, which shows its own view.
func TestPoolDifferentView(t *testing.T) {
	pool := testPool(t)
	spec := testSpec(t, `cat /proc/net/dev | tail -n +3 | wc -l`)
	awaitPrepared(t, pool, spec)
	other := testSpec(t, `cat /proc/net/dev | tail -n +3 | wc -l`)
	other.Network = "host"
	p, err := pool.New(other)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Cmd.Stdout = &out
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	_, _ = p.Wait()
	if st := pool.Stats(); st.Taken != 0 || st.Built != 1 || st.Waiting != 1 {
		t.Fatalf("stats %+v", st)
	}
	if strings.TrimSpace(out.String()) == "1" {
		t.Fatalf("the host's network was not shown: %q", out.String())
	}
}

// TestPoolStale: a prepared sandbox older than the pool's age is not
// taken (the host may have changed beneath it); it is ended.
func TestPoolStale(t *testing.T) {
	pool := testPool(t)
	spec := testSpec(t, `true`)
	old := awaitPrepared(t, pool, spec)
	key, _ := spec.viewKey()
	pool.mu.Lock()
	pool.views[key].at = time.Now().Add(-2 * pool.maxAge)
	pool.mu.Unlock()
	r := runSpecWith(t, pool, spec)
	if !r.res.Reported || r.res.Status.ExitStatus() != 0 {
		t.Fatalf("got %+v", r)
	}
	if st := pool.Stats(); st.Taken != 0 || st.Built != 1 {
		t.Fatalf("stats %+v", st)
	}
	assertGone(t, old.Pid())
}

// TestPoolKilled: a prepared init killed while it waited is replaced by a
// sandbox built for the run, which runs the command.
func TestPoolKilled(t *testing.T) {
	pool := testPool(t)
	spec := testSpec(t, `echo ran`)
	prepared := awaitPrepared(t, pool, spec)
	if err := syscall.Kill(prepared.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := runSpecWith(t, pool, spec)
	if !r.res.Reported || r.res.Status.ExitStatus() != 0 || r.stdout != "ran\n" {
		t.Fatalf("got %+v", r)
	}
}

// TestPoolClose: closing the pool ends the prepared sandboxes; later runs
// are built for themselves.
func TestPoolClose(t *testing.T) {
	pool := testPool(t)
	spec := testSpec(t, `echo ran`)
	prepared := awaitPrepared(t, pool, spec)
	pool.Close()
	assertGone(t, prepared.Pid())
	r := runSpecWith(t, pool, spec)
	if r.stdout != "ran\n" {
		t.Fatalf("got %+v", r)
	}
	if st := pool.Stats(); st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// runSpecWith runs spec in whatever sandbox the pool gives.
func runSpecWith(t *testing.T, pool *Pool, spec Spec) ran {
	t.Helper()
	p, err := pool.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return runProcess(t, p)
}

// assertGone checks that pid has been reaped (or is about to be: the
// pool ends discarded sandboxes in the background).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			return
		}
	}
	t.Fatalf("the prepared init %d is still there", pid)
}
