package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"avfs/wire"
)

// daemon is an `avfs serve` started by a test.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	sock   string
	stderr *bytes.Buffer
	exited chan error
}

// serve starts `avfs serve` in a's home and waits until it answers.
func (a *avfs) serve(args ...string) *daemon {
	a.t.Helper()
	d := &daemon{t: a.t, sock: filepath.Join(a.home, "run", "avfs.sock"), stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	d.cmd = a.command(append([]string{"serve"}, args...)...)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	a.t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		if code, _ := d.get("/health"); code == http.StatusOK {
			return d
		}
		select {
		case err := <-d.exited:
			a.t.Fatalf("avfs serve ended: %v: %s", err, d.stderr)
		default:
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("avfs serve does not answer: %s", d.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *daemon) get(path string) (int, []byte) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	resp, err := c.Get("http://avfs" + path)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func (d *daemon) status() wire.ServeStatus {
	d.t.Helper()
	code, b := d.get("/v1/status")
	var st wire.ServeStatus
	if err := json.Unmarshal(b, &st); code != http.StatusOK || err != nil {
		d.t.Fatalf("status: %d %s", code, b)
	}
	return st
}

// waitRuns waits until n runs are in flight.
func (d *daemon) waitRuns(n int) {
	d.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); d.status().RunsInFlight != n; {
		if time.Now().After(deadline) {
			d.t.Fatalf("runs in flight: %d, want %d", d.status().RunsInFlight, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stable is an envelope without what differs from run to run (its id,
// timings, the run directory), encoded as avfs --json prints it.
func stable(t *testing.T, raw []byte) []byte {
	t.Helper()
	var env wire.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	env.ID, env.Vault, env.Timing, env.Policy.EvalUS, env.DecisionID = "", "", wire.Timing{}, 0, ""
	if env.Checkpoint != nil {
		env.Checkpoint.Name = ""
	}
	if env.Approval != nil {
		env.Approval.ID, env.Approval.ExpiresAt = "", time.Time{}
	}
	if env.Mount != nil {
		env.Mount.Dir = ""
	}
	if env.Sandbox != nil {
		env.Sandbox.Landlock = 0
	}
	if env.Process != nil {
		env.Process.DurationMS = 0
	}
	if env.Effects != nil {
		env.Effects.EvalUS = 0
	}
	var b bytes.Buffer
	if err := writeJSON(&b, env); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestServeClient(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	d := a.serve()
	a.ok("vault", "create", "here")
	a.ok("vault", "create", "there")
	for _, argv := range [][]string{{"sh", "-c", "echo hello; echo '<&>' >&2; echo x > a.txt"}, {"cat", "/etc/shadow"}, {"curl", "example.com"}} {
		local := a.proxy([]string{"--vault", "here"}, argv...)
		served := a.proxy([]string{"--vault", "there", "--server", d.sock}, argv...)
		if strings.Contains(served.stderr, "in-process") {
			t.Fatalf("not served: %s", served.stderr)
		}
		if served.code != local.code || !bytes.Equal(stable(t, served.raw), stable(t, local.raw)) {
			t.Fatalf("%q: served (exit %d)\n%s\nin-process (exit %d)\n%s", argv, served.code, stable(t, served.raw), local.code, stable(t, local.raw))
		}
	}
	if st := d.status(); st.RunsTotal != 3 || st.RunsInFlight != 0 {
		t.Fatalf("status: %+v", st)
	}
	// AVFS_SERVER names it as --server does.
	if r := a.with("AVFS_SERVER=default").proxy(nil, "true"); r.code != 0 || strings.Contains(r.stderr, "in-process") || d.status().RunsTotal != 4 {
		t.Fatalf("AVFS_SERVER: %d %s", r.code, r.stderr)
	}
	// Without a daemon, the run is in-process, and said so on stderr only.
	r := a.proxy([]string{"--server", filepath.Join(t.TempDir(), "none.sock")}, "echo", "hi")
	if r.code != 0 || !strings.Contains(r.stderr, "is not answering") || !strings.Contains(r.stderr, "running in-process") || r.env.Process.Stdout != "hi\n" {
		t.Fatalf("fallback: %d %s", r.code, r.stderr)
	}
	// A second daemon on the same socket is refused.
	second := a.command("serve")
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "another avfs serve is running") {
		t.Fatalf("second daemon: %v %s", err, out)
	}
}

// TestServeShutdown: SIGTERM interrupts the runs in flight (after the
// grace), which answer their envelope, and leaves no mount; a daemon
// killed with SIGKILL is recovered by the next start.
func TestServeShutdown(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	d := a.serve("--grace", "300ms")
	start := func() chan proxyRun {
		got := make(chan proxyRun, 1)
		go func() {
			args := proxyArgs([]string{"--server", d.sock, "--mount-mode", "fuse", "--timeout", "60s"}, "sleep", "30")
			cmd := a.command(args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			got <- proxyRun{code: code, raw: out.Bytes(), stderr: errb.String()}
		}()
		return got
	}
	got := start()
	d.waitRuns(1)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("avfs serve after SIGTERM: %v: %s", err, d.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("avfs serve did not end after SIGTERM: %s", d.stderr)
	}
	r := <-got
	var env wire.Envelope
	if err := json.Unmarshal(r.raw, &env); err != nil || env.Process == nil || env.Process.Interrupted != "SIGTERM" || r.code != 128+15 {
		t.Fatalf("interrupted run: exit %d %s %s", r.code, r.raw, r.stderr)
	}
	if m := mountsUnder(a.home); len(m) > 0 {
		t.Fatalf("mounts left after SIGTERM: %v", m)
	}
	if dirs := a.runDirs(); len(dirs) > 0 {
		t.Fatalf("run directories left after SIGTERM: %v", dirs)
	}

	// kill -9 with a run in flight: the next daemon starts on the stale
	// socket, and what the run left is cleaned up.
	d = a.serve()
	got = start()
	d.waitRuns(1)
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	// The client does not run the command again in-process: it says the
	// daemon went away.
	if r := <-got; r.code != wire.ExitAvfsFailed || strings.Contains(r.stderr, "in-process") || !strings.Contains(string(r.raw), "ended before it answered") {
		t.Fatalf("client of a killed daemon: exit %d %s %s", r.code, r.raw, r.stderr)
	}
	d = a.serve()
	if r := a.proxy([]string{"--server", d.sock}, "echo", "again"); r.code != 0 || strings.Contains(r.stderr, "in-process") {
		t.Fatalf("after a restart: %d %s", r.code, r.stderr)
	}
	for deadline := time.Now().Add(30 * time.Second); len(mountsUnder(a.home)) > 0 || len(a.runDirs()) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("left after kill -9 and a restart: mounts %v, run directories %v", mountsUnder(a.home), a.runDirs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-d.exited; err != nil {
		t.Fatalf("avfs serve: %v", err)
	}
}
