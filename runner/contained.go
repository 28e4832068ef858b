package runner

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/sandbox"
	"avfs/wire"
)

// A sandboxed command (ProcSpec.Sandbox) is supervised through its init,
// PID 1 of the run's PID namespace: no scan of /proc, no subreaper, no
// tracker. Every process the command starts is in the namespace, so a
// signal to the init reaches them all (the init forwards it) and SIGKILL
// to the init ends them all (the kernel does). The init itself ends what
// the command left behind when it exits, and counts it.

// startSandboxed starts the command of p.spec in its sandbox. A sandbox
// that cannot be built is a *wire.Error with code sandbox_unavailable;
// nothing of the command ran then.
func (p *Proc) startSandboxed() error {
	pp, err := p.openPipes()
	if err != nil {
		return err
	}
	defer closeAll(pp.child...) // the child's ends, closed once it has them
	ours := pp.ours
	or, er, ow, ew, stdin := pp.outR, pp.errR, pp.stdout, pp.stderr, pp.stdin
	spec := *p.spec.Sandbox
	spec.Argv, spec.Env, spec.KillGrace = p.spec.Argv, p.spec.Env, p.spec.KillGrace
	var sb *sandbox.Process
	if p.spec.Sandboxes != nil {
		sb, err = p.spec.Sandboxes.New(spec)
	} else {
		sb, err = sandbox.New(p.spec.Exe, spec)
	}
	if err != nil {
		closeAll(ours...)
		return err
	}
	sb.Cmd.Stdout, sb.Cmd.Stderr = ow, ew
	if stdin != nil {
		sb.Cmd.Stdin = stdin
	}
	t := time.Now()
	p.started = t
	if err := sb.Start(); err != nil {
		closeAll(ours...)
		return err
	}
	p.setup = time.Since(t)
	p.sb, p.cmd, p.pid = sb, sb.Cmd, sb.Pid()
	p.startStreams(or, er)
	return nil
}

// superviseSandboxed follows the init until it exits, times out or is
// cancelled: then the init gets the first signal (SIGTERM, or the one avfs
// received), passes it and SIGCONT to every process of the run, and sends
// SIGKILL after KillGrace; avfs kills the init itself if it has not ended
// the run initSlack later.
func (p *Proc) superviseSandboxed() {
	exited := make(chan struct{})
	var waited time.Time
	var state *os.ProcessState
	go func() {
		state, _ = p.sb.Wait()
		waited = time.Now()
		close(exited)
	}()
	var deadline <-chan time.Time
	if p.spec.Timeout > 0 {
		t := time.NewTimer(p.spec.Timeout - time.Since(p.started))
		defer t.Stop()
		deadline = t.C
	}
	timedOut, over := false, false
	select {
	case <-exited:
		over = true
	case <-deadline:
		timedOut = true
	case <-p.ctx.Done():
	}
	select {
	case <-exited:
		timedOut, over = false, true
	default:
	}
	interrupted := ""
	var err error
	if !over {
		first := unix.SIGTERM
		var in Interrupted
		if !timedOut && errors.As(context.Cause(p.ctx), &in) {
			first = in.Signal
			interrupted = unix.SignalName(in.Signal)
		}
		// The init ends the run: the signal to every process, SIGKILL
		// after the grace. SIGKILL to the init is the backstop.
		p.signalInit(first)
		grace := time.NewTimer(p.spec.KillGrace + initSlack)
		select {
		case <-exited:
		case <-grace.C:
			p.signalInit(unix.SIGKILL)
			select {
			case <-exited:
			case <-time.After(killWait):
				err = wire.Errorf(wire.CodeInternal, "runner: the sandbox's init %d did not end after SIGKILL", p.pid)
			}
		}
		grace.Stop()
	}
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	var res ProcResult
	end := time.Now()
	if err == nil {
		sr := p.sb.Result()
		end = waited
		if sr.Reported {
			res.ExitCode, res.Signal = waitStatus(sr.Status)
			res.KilledInSandbox = sr.Ended
			res.SandboxTeardown = max(waited.Sub(sr.At), 0)
		} else {
			res.ExitCode, res.Signal = -1, ""
			if state != nil {
				res.ExitCode, res.Signal = waitStatus(state.Sys().(syscall.WaitStatus))
			}
		}
	} else {
		res.ExitCode = -1
	}
	res.SandboxSetup = p.setup
	p.finish(res, err, timedOut, interrupted, end)
}

// initSlack is how long past the grace avfs waits for a sandbox's init
// to end the run before it kills the init.
const initSlack = 2 * time.Second

// signalInit sends sig to the init, which passes it on to every process
// of the run (SIGKILL ends the init, and with it the namespace).
func (p *Proc) signalInit(sig unix.Signal) {
	_ = p.sb.Signal(sig) // through its pidfd: never another process once it is reaped
}

// waitStatus is a wait status as an exit code (128+N for signal N) and
// the signal's name.
func waitStatus(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}
