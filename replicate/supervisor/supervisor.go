// Package supervisor keeps one replicator process per replicated vault
// (avfs serve's replication). It never links the replicator (Litestream)
// nor opens a vault.
package supervisor

import (
	"context"
	"io"
	"os/exec"
	"sort"
	"syscall"
	"time"
)

// Supervisor keeps one replicator process per replicated vault: avfs
// serve's replication. Every Poll it lists the vaults (List: name → URL),
// starts a process (Command) for each new one, stops (SIGTERM, then
// SIGKILL after StopGrace) the process of one that is gone or whose URL
// changed, and restarts one that exited, after a backoff that doubles from
// 1 s to a minute while it keeps failing. A process is sent SIGTERM when
// the supervisor's process dies (PR_SET_PDEATHSIG). Run returns once ctx is done and
// every process has stopped. The processes are children of this one; a
// Supervisor never opens a vault.
type Supervisor struct {
	List    func() (map[string]string, error)
	Command func(name string) []string
	Env     []string
	Stderr  io.Writer
	Poll    time.Duration
	// StopGrace is how long a stopped process may take to ship what it
	// has (0: 35 s, above the replicator's final 30 s).
	StopGrace time.Duration
	Logf      func(format string, a ...any)
}

type child struct {
	url     string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
	backoff time.Duration
	retryAt time.Time
	started time.Time
}

// Run supervises until ctx is done.
func (s *Supervisor) Run(ctx context.Context) {
	logf := s.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	grace := s.StopGrace
	if grace <= 0 {
		grace = 35 * time.Second
	}
	children := map[string]*child{}
	stop := func(name string, c *child) {
		if c.cmd != nil {
			select {
			case <-c.exited:
			default:
				_ = c.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-c.exited:
				case <-time.After(grace):
					_ = c.cmd.Process.Kill()
					<-c.exited
				}
			}
		}
		delete(children, name)
	}
	start := func(name string, c *child) {
		argv := s.Command(name)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Stderr = s.Env, s.Stderr
		// A supervisor killed outright takes its replicators with it: an
		// orphan would hold the vault's replicator lock against the next.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		c.cmd, c.exited, c.started = cmd, make(chan struct{}), time.Now()
		if err := cmd.Start(); err != nil {
			c.err = err
			close(c.exited)
			return
		}
		logf("replicating vault %s to %s (pid %d)", name, c.url, cmd.Process.Pid)
		go func() {
			c.err = cmd.Wait()
			close(c.exited)
		}()
	}
	tick := time.NewTicker(s.Poll)
	defer tick.Stop()
	for {
		want, err := s.List()
		if err != nil {
			logf("replication: list vaults: %v", err)
		}
		if err == nil {
			for name, c := range children {
				if url, ok := want[name]; !ok || url != c.url {
					logf("replication of vault %s stops", name)
					stop(name, c)
				}
			}
			names := make([]string, 0, len(want))
			for n := range want {
				names = append(names, n)
			}
			sort.Strings(names)
			now := time.Now()
			for _, name := range names {
				c := children[name]
				if c == nil {
					c = &child{url: want[name], backoff: time.Second}
					children[name] = c
					start(name, c)
					continue
				}
				select {
				case <-c.exited:
				default:
					continue // running
				}
				if c.retryAt.IsZero() {
					if now.Sub(c.started) > time.Minute {
						c.backoff = time.Second // it ran a while: a new failure
					}
					logf("replicator of vault %s exited (%v); restarting in %s", name, c.err, c.backoff)
					c.retryAt = now.Add(c.backoff)
					c.backoff = min(2*c.backoff, time.Minute)
				}
				if now.After(c.retryAt) {
					c.retryAt = time.Time{}
					start(name, c)
				}
			}
		}
		select {
		case <-ctx.Done():
			for name, c := range children {
				stop(name, c)
			}
			return
		case <-tick.C:
		}
	}
}
