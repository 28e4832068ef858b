package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// Process is a command held in a sandbox: the init (init.c), PID 1 of
// the run's PID namespace and a child of this process, with the command as
// its child.
//
// Signals sent to the init (Signal) reach every process of the run;
// SIGKILL to the init ends them all at once, the kernel's doing. The
// command's processes can neither signal nor see anything outside.
type Process struct {
	// Cmd is what starts the init: it makes the namespaces, clones the
	// init and exits (see init.c). Set its Stdin, Stdout and Stderr (the
	// command's) before Start; nothing else of it is to be changed, and
	// it is not to be waited for: Wait, Signal and Pid are the init's.
	Cmd *exec.Cmd
	// Landlock is the Landlock ABI the init restricted the run with (0:
	// the kernel has none), known after Start.
	Landlock int

	status *os.File      // our end of the status pipe
	lines  *bufio.Reader // over status
	last   chan string   // the init's last line ("exit …"), once it wrote it
	lastAt time.Time     // when it arrived
	plan   *os.File
	child  []*os.File // the init's ends, closed once it has them
	init   *os.Process
	state  *os.ProcessState // once Wait returned

	// A prepared sandbox (see Pool) waits at its plan's "await" for the
	// rest: what the run that takes it adds.
	control *os.File        // our end of its fd 5, until Start sends the rest
	spec    *Spec           // the run that took it (nil: not taken)
	exe     string          // to build the run's sandbox afresh should this one be gone
	root    string          // its own root directory, removed once it is gone
	copies  []chan struct{} // closed when the copy of a stream that is not a file is drained
	done    func()          // called once Wait has reaped the init
}

// Result is how a sandboxed command ended.
type Result struct {
	// Status is the command's wait status; valid when Reported.
	Status syscall.WaitStatus
	// Reported is false when the init was killed before the command
	// ended (avfs's SIGKILL after a timeout): the command died with it.
	Reported bool
	// Ended counts the processes the command left running that the init
	// ended after it exited.
	Ended int
	// At is when the init reported; what follows until it is reaped is
	// the teardown of the run's namespaces.
	At time.Time
}

// New prepares the sandbox of spec; nothing runs until Start. The exe is
// this program's own binary (os.Executable), which holds the init.
func New(exe string, spec Spec) (*Process, error) {
	plan, err := spec.plan()
	if err != nil {
		return nil, err
	}
	return start(exe, plan, spec, false)
}

// start prepares the init for plan; with control, a socket becomes its
// fd 5, for a plan that awaits the rest (see Pool).
func start(exe string, plan []byte, spec Spec, control bool) (*Process, error) {
	planFile, err := memfd("avfs-sandbox-plan", plan)
	if err != nil {
		return nil, err
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		planFile.Close()
		return nil, wire.Errorf(wire.CodeSandbox, "sandbox: pipe: %v", err)
	}
	// The namespaces are made by the started process itself (init.c's
	// launch), not by the clone that starts it: a clone that makes a user
	// namespace cannot share avfs's memory (vfork), so it would copy
	// avfs's page tables, and every page avfs wrote afterwards would take
	// a fault. Started without them it is a vfork and an exec.
	net := 0
	if spec.Network != wire.NetworkHost {
		net = 1
	}
	p := &Process{status: sr, lines: bufio.NewReader(sr), plan: planFile, child: []*os.File{planFile, sw}}
	if control {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			p.Close()
			return nil, wire.Errorf(wire.CodeSandbox, "sandbox: socketpair: %v", err)
		}
		p.control = os.NewFile(uintptr(fds[0]), "control")
		p.child = append(p.child, os.NewFile(uintptr(fds[1]), "control"))
	}
	p.Cmd = &exec.Cmd{
		Path: exe, Args: []string{"avfs-sandbox"}, Dir: "/",
		Env:        []string{initEnv, fmt.Sprintf("%s=%d %d %d", nsEnv, spec.UID, spec.GID, net)},
		ExtraFiles: p.child, // fds 3, 4 and, prepared, 5
		SysProcAttr: &syscall.SysProcAttr{
			// A new session: the run has no controlling terminal and
			// avfs's terminal signals do not reach it directly.
			Setsid: true,
			// The kernel sends it when the forking thread ends: Start is
			// to be called from an ordinary goroutine (not one that
			// locked its thread), whose thread lives as long as avfs. The
			// init, cloned with CLONE_PARENT, has the same parent thread
			// and asks for the same.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	return p, nil
}

// Start starts the init and waits until the view is built. It must not
// be called from a goroutine that locked its OS thread (see Pdeathsig). A failure to
// build it is a *wire.Error with code sandbox and the step that failed;
// nothing of the command ran then, and the init has been reaped.
//
// A prepared sandbox (from Pool.New) is already started: Start sends it
// the rest of the view and the command, with Cmd's streams. Should it be
// gone (killed while it waited), Start builds the run's sandbox afresh.
func (p *Process) Start() error {
	if p.spec != nil {
		return p.resume()
	}
	if err := p.launch(); err != nil {
		return err
	}
	return p.expect("ready")
}

// launch starts the starter, which makes the namespaces and clones the
// init, and reaps it.
func (p *Process) launch() error {
	err := p.Cmd.Start()
	for _, f := range p.child {
		f.Close()
	}
	p.child = nil
	if err != nil {
		p.status.Close()
		p.closeControl()
		werr := wire.Errorf(wire.CodeSandbox, "sandbox: start: %v", err).With("step", "clone")
		var errno syscall.Errno
		if errors.As(err, &errno) {
			werr = werr.With("errno", errno.Error())
		}
		return werr
	}
	// The starter says the init's pid, or why it could not clone it, and
	// exits.
	line, rerr := p.lines.ReadString('\n')
	_, _ = p.Cmd.Process.Wait() // not Cmd.Wait: its streams are the run's, open until the run ends
	pid, perr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if !strings.HasPrefix(line, "pid ") || perr != nil || pid <= 0 {
		_ = p.Cmd.Wait()
		p.status.Close()
		p.closeControl()
		if rest, ok := strings.CutPrefix(line, "error "); ok {
			return setupError(strings.TrimSpace(rest))
		}
		return wire.Errorf(wire.CodeSandbox, "sandbox: the namespaces were not made (%q, %v)", line, rerr).With("step", "clone")
	}
	// The init is this process's child (CLONE_PARENT), not reaped until
	// Wait: the pid is its own.
	if p.init, err = os.FindProcess(pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
		_ = p.Cmd.Wait()
		p.status.Close()
		p.closeControl()
		return wire.Errorf(wire.CodeSandbox, "sandbox: the init %d: %v", pid, err).With("step", "clone")
	}
	return nil
}

// expect reads the init's next line, which must be word: "ready" (the
// command starts) or "prepared" (a prepared sandbox waits). Anything else
// is the init's failure: it is killed and reaped.
func (p *Process) expect(word string) error {
	_, err := p.expectOrGone(word)
	return err
}

// expectOrGone is expect, and reports whether the init ended without a
// word (killed from outside, say): then it did not start the command.
func (p *Process) expectOrGone(word string) (gone bool, err error) {
	line, rerr := p.lines.ReadString('\n')
	if rest, ok := strings.CutPrefix(line, word); ok && (rest == "\n" || rest[0] == ' ') {
		if word != "ready" {
			return false, nil
		}
		p.Landlock, _ = strconv.Atoi(strings.TrimSpace(rest))
		p.last = make(chan string, 1)
		go func() {
			line, _ := p.lines.ReadString('\n')
			p.lastAt = time.Now()
			p.last <- line
		}()
		return false, nil
	}
	// The init failed (or died): it wrote why, or nothing.
	_ = p.init.Kill()
	_, _ = p.Wait()
	p.status.Close()
	p.closeControl()
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		return false, setupError(strings.TrimSpace(rest))
	}
	return true, wire.Errorf(wire.CodeSandbox, "sandbox: the init ended before the view was built (%v)", rerr).With("step", "init")
}

func (p *Process) closeControl() {
	if p.control != nil {
		p.control.Close()
		p.control = nil
	}
}

// setupError reads "STEP OP ERRNO MSG".
func setupError(s string) error {
	parts := strings.SplitN(s, " ", 4)
	if len(parts) < 4 {
		return wire.Errorf(wire.CodeSandbox, "sandbox: %s", s)
	}
	errno, _ := strconv.Atoi(parts[2])
	return wire.Errorf(wire.CodeSandbox, "sandbox: %s: %s: %v", parts[1], parts[3], syscall.Errno(errno)).
		With("step", parts[1]).With("errno", syscall.Errno(errno).Error())
}

// Pid is the init's pid, once Start succeeded.
func (p *Process) Pid() int { return p.init.Pid }

// Signal sends sig to the init, once Start succeeded: it passes it on to
// every process of the run (SIGKILL ends the init and the namespace).
func (p *Process) Signal(sig os.Signal) error { return p.init.Signal(sig) }

// Wait waits for the init to exit, once Start succeeded: then every
// process of the run has ended (the kernel ends a PID namespace with its
// init), and the streams Cmd copies, if any, are drained. It returns the
// init's state; calling it again returns the same.
func (p *Process) Wait() (*os.ProcessState, error) {
	if p.state != nil {
		return p.state, nil
	}
	st, err := p.init.Wait()
	_ = p.Cmd.Wait() // the starter is reaped: this waits for Cmd's copies and closes its pipes
	for _, drained := range p.copies {
		<-drained
	}
	if p.root != "" {
		_ = os.Remove(p.root)
	}
	if p.done != nil {
		p.done()
		p.done = nil
	}
	if err != nil {
		return nil, err
	}
	p.state = st
	return st, nil
}

// Result reads how the command ended, once the init has exited (after
// Wait). Teardown is how long the init took to go after it reported
// (the kernel tearing the namespaces down).
func (p *Process) Result() Result {
	defer p.status.Close()
	line := <-p.last
	f := strings.Fields(strings.TrimPrefix(line, "exit "))
	if !strings.HasPrefix(line, "exit ") || len(f) != 2 {
		return Result{}
	}
	st, err1 := strconv.Atoi(f[0])
	ended, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return Result{}
	}
	return Result{Status: syscall.WaitStatus(st), Reported: true, Ended: ended, At: p.lastAt}
}

// Close releases what Start did not (when Start was never called); a
// prepared sandbox that was taken but not started is ended.
func (p *Process) Close() {
	for _, f := range p.child {
		f.Close()
	}
	p.child = nil
	if p.init != nil && p.state == nil {
		_ = p.init.Kill()
		_, _ = p.Wait()
	}
	p.closeControl()
	p.status.Close()
}

// Probe reports whether this kernel lets avfs build a sandbox: nil, or a
// *wire.Error (code sandbox_unavailable) saying what it refused, which is
// the reason for mode none under --sandbox auto. It builds the part of a
// view that needs the kernel's consent — the namespaces, a tmpfs on root
// (an empty private directory), a bind, a /proc of the run's own — and
// runs nothing: one clone and one exec of the init, about a millisecond.
func Probe(exe, root string, network wire.Network) error {
	var b planBuilder
	b.add("root", root)
	b.add("proc", "/proc")
	b.add("bind", "/dev/null", "/null", "vo")
	if network != wire.NetworkHost {
		b.add("lo")
	}
	p, err := start(exe, b.buf.Bytes(), Spec{Network: network, UID: os.Getuid(), GID: os.Getgid()}, false)
	if err != nil {
		return err
	}
	p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr = nil, nil, nil
	if err := p.Start(); err != nil {
		return err
	}
	_, _ = p.Wait()
	p.status.Close()
	return nil
}
