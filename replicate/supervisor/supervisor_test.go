package supervisor

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSupervisor: a process per listed name; one whose name goes is
// stopped, one that exits is started again, and all stop with Run.
func TestSupervisor(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	want := map[string]string{"a": "u1", "b": "u2"}
	s := &Supervisor{
		List: func() (map[string]string, error) {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]string{}
			for k, v := range want {
				out[k] = v
			}
			return out, nil
		},
		// Each child records its pid in DIR/NAME.PID and lives until
		// signalled.
		Command: func(name string) []string {
			return []string{"/bin/sh", "-c", `touch "$0/$1.$$"; exec sleep 60`, dir, name}
		},
		Poll:      20 * time.Millisecond,
		StopGrace: 5 * time.Second,
	}
	pids := func(name string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, name+".*"))
		return m
	}
	alive := func(pidFile string) bool {
		pid := pidOf(pidFile)
		return pid > 0 && syscall.Kill(pid, 0) == nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	waitFor("a and b did not start", func() bool { return len(pids("a")) == 1 && len(pids("b")) == 1 })
	a := pids("a")[0]
	mu.Lock()
	delete(want, "a")
	mu.Unlock()
	waitFor("a was not stopped", func() bool { return !alive(a) })
	b := pids("b")[0]
	syscall.Kill(pidOf(b), syscall.SIGKILL)
	waitFor("b was not restarted", func() bool { return len(pids("b")) == 2 })
	cancel()
	<-done
	for _, p := range pids("b") {
		if alive(p) {
			t.Fatalf("%s outlived Run", p)
		}
	}
}

// pidOf is the pid in a file name NAME.PID.
func pidOf(pidFile string) int {
	pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Ext(pidFile), "."))
	return pid
}
