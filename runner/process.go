package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/sandbox"
	"avfs/wire"
)

// Defaults for ProcSpec fields left zero.
const (
	DefaultKillGrace       = 5 * time.Second
	DefaultMaxOutput int64 = 1 << 20
)

// Internal bounds; variables so that tests can shorten them.
var (
	pollInterval    = 25 * time.Millisecond  // between /proc scans while the command runs and while it is ended
	maxPollInterval = 250 * time.Millisecond // the same on a machine with very many processes (see tracker.interval)
	drainWait       = 2 * time.Second        // after the last process ended, before the pipes are closed under the drains
	killWait        = 10 * time.Second       // after the first SIGKILL, before giving up on processes that do not die
	teeWait         = time.Second            // for a live writer to take what is queued for it
)

// running holds the token of the one unsandboxed command that may run at
// a time: it sets the process's child subreaper and scans /proc for its
// descendants. Sandboxed commands take no token.
var running = make(chan struct{}, 1)

// ProcSpec is one command to run.
type ProcSpec struct {
	// Argv is the command and its arguments. Argv[0] is looked up on the PATH
	// in Env (not avfs's own PATH; /bin:/usr/bin when Env has none) unless it
	// contains a slash; relative names are relative to Dir.
	Argv []string
	// Dir is the working directory; empty means avfs's own.
	Dir string
	// DirServed says that Dir is on a FUSE mount this process serves. The
	// child must then make no FUSE request between fork and exec: the
	// forking thread keeps its P until the exec, so such a request (a
	// chdir, or the exec of a program on the mount) can deadlock against a
	// stop-the-world (go-fuse's doc lists these deadlocks). A program off
	// the mount is forked from a thread already in Dir (see startIn); one
	// whose exec reads the mount (the program, or a #! interpreter, is on
	// it) is started through /bin/sh, which changes into Dir and execs it.
	// Either way the command gets the same environment, argv and exit
	// statuses (through the shell the environment may be reordered; a
	// script on the mount sees $0 as given).
	DirServed bool
	// Env is the complete environment (KEY=VALUE); nothing else is inherited.
	Env []string
	// Stdin is the command's standard input; nil means /dev/null. An
	// *os.File is passed to the command as is; any other reader is copied
	// through a pipe by a goroutine that ends at the first error or, if the
	// reader blocks, when its Read returns.
	Stdin io.Reader
	// Timeout bounds the command's run time; 0 means none.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL when processes are
	// ended (DefaultKillGrace when 0).
	KillGrace time.Duration
	// MaxOutput is the number of bytes kept per stream, the first and the
	// last half (DefaultMaxOutput when 0).
	MaxOutput int64
	// Stdout and Stderr, when set, get a live copy of the streams. They are
	// written from their own goroutine (one for both if they are the same
	// writer) and never block the drains: chunks that do not fit in a
	// bounded queue, or come after a write error, are dropped and counted in
	// Output.LiveDropped. After the command ends, Run waits up to a second
	// for a writer to take what is queued; a Write still in progress then
	// may return after Run has.
	Stdout, Stderr io.Writer
	// Exclude, when set, marks processes that belong to the caller: a
	// process for which Exclude returns true for its pid, its process group
	// id or its session id is never signalled or reaped, nor are its
	// descendants. It is called from another goroutine while the command
	// runs and is ended.
	//
	// Without it, a process belongs to the command (and is ended and
	// reaped) when it is the command itself or is in the command's session;
	// or a scan of /proc (every 25 ms while the command runs, less often on
	// a machine with very many processes) saw it with a parent that belongs
	// to the command; or it is a child of avfs
	// (an orphan reparented to avfs as child subreaper, say after a double
	// fork and setsid) that started no earlier than the command, is not in
	// avfs's session, and was not seen under another parent and did not
	// exist when Start was called. So avfs's other children, and their
	// descendants, are left alone when they existed before Start, or run in
	// avfs's session (os/exec's default, also with Setpgid); a child the
	// caller starts in a new session (Setsid) while a command runs must be
	// excluded.
	Exclude func(pid int) bool
	// Sandbox, when set, holds the command in Linux namespaces with that
	// view (its Argv, Env and KillGrace are taken from here). Dir is then
	// a path in the view, Argv[0] is looked up on Env's PATH inside it,
	// DirServed and Exclude do not apply, and Exe must name this binary
	// (which holds the sandbox's init). See startSandboxed.
	Sandbox *sandbox.Spec
	// Sandboxes, when set, gives the sandbox: one prepared ahead when it
	// has one of the same view (see sandbox.Pool).
	Sandboxes *sandbox.Pool
	Exe       string
}

// ProcResult is how a command ended.
type ProcResult struct {
	// ExitCode is the command's exit status; 128+N when signal N ended it;
	// 127 or 126 when the program was not found or is not executable; -1
	// when it never started or could not be ended (Run also returns an
	// error then).
	ExitCode int
	// Signal is the name of the signal that ended the command ("SIGKILL"),
	// or "".
	Signal string
	// TimedOut reports that the command was ended because of the Timeout.
	TimedOut bool
	// NotFound reports that the program does not exist (ExitCode 127) or is
	// not executable (126: not executable, a directory, a bad interpreter,
	// not an executable format).
	NotFound bool
	// Duration runs from the start to the end of the command's last process.
	Duration time.Duration
	// Stdout and Stderr are the captured streams.
	Stdout, Stderr Output
	// Killed lists the pids of the command's descendants that were still
	// running when it exited or was ended, and were therefore ended too.
	Killed []int
	// Interrupted is the signal of an Interrupted cancellation that ended
	// the command before it exited by itself ("SIGINT"), or "".
	Interrupted string
	// KilledInSandbox counts, for a sandboxed command, the processes it
	// left running that its sandbox ended (their pids are the namespace's).
	KilledInSandbox int
	// SandboxSetup is how long building the sandbox took, and
	// SandboxTeardown how long its init took to go once the run was over
	// (0 without one).
	SandboxSetup, SandboxTeardown time.Duration
}

// Proc is a started command.
type Proc struct {
	spec    ProcSpec
	ctx     context.Context
	cmd     *exec.Cmd // nil when the program was not found
	pid     int
	started time.Time
	tr      *tracker

	stdout, stderr *drain
	tees           []*tee
	stdinW         *os.File         // avfs's end of the stdin pipe, if any
	restore        func()           // undoes setSubreaper
	sb             *sandbox.Process // the sandbox's init, for a sandboxed command
	setup          time.Duration    // building the sandbox

	mu            sync.Mutex
	reaped        bool        // the command has been waited for: its pid may be reused
	groupExcluded atomic.Bool // mirrors tracker.groupExcluded for Signal

	token bool // holds running (an unsandboxed command)

	done chan struct{}
	res  ProcResult
	err  error
}

// Interrupted is the cause (context.Cause) of a context cancelled because
// avfs received a signal: the command's processes are then sent that
// signal rather than SIGTERM, as if it had reached them (Ctrl-C makes a
// Python program raise KeyboardInterrupt), and SIGKILL after the grace.
type Interrupted struct{ Signal syscall.Signal }

func (i Interrupted) Error() string { return "interrupted by " + unix.SignalName(i.Signal) }

// Run runs spec and returns when the command and every process it started
// have ended and both streams are drained. Cancelling ctx (e.g. on SIGINT
// or SIGTERM to avfs) ends the command as a timeout does, with the signal
// of an Interrupted cause first, but TimedOut stays false. The error, a *wire.Error, is only for failures on avfs's side; the
// command's own failures are in the result.
func Run(ctx context.Context, spec ProcSpec) (ProcResult, error) {
	p, err := Start(ctx, spec)
	if err != nil {
		return ProcResult{ExitCode: -1}, err
	}
	return p.Wait()
}

// Start starts spec (see Run) and returns a handle to signal and wait for
// it. One unsandboxed command runs at a time per process: Start waits until the previous
// one has ended (or ctx is done); a sandboxed command does not wait, and
// is not waited for. A program that is not found is not an
// error: the Proc has ended already and Wait reports NotFound.
func Start(ctx context.Context, spec ProcSpec) (*Proc, error) {
	if err := checkSpec(&spec); err != nil {
		return nil, err
	}
	p := &Proc{spec: spec, ctx: ctx, done: make(chan struct{})}
	if spec.Sandbox != nil {
		// Supervised through its init: no subreaper, no tracker, nothing
		// of the process shared with another command.
		if err := p.startSandboxed(); err != nil {
			return nil, err
		}
		go p.superviseSandboxed()
		return p, nil
	}
	select {
	case running <- struct{}{}:
		p.token = true
		if err := ctx.Err(); err != nil {
			<-running
			return nil, wire.Errorf(wire.CodeInternal, "runner: not started: %w", err)
		}
	case <-ctx.Done():
		return nil, wire.Errorf(wire.CodeInternal, "runner: not started: %w", ctx.Err())
	}
	path, status := lookPath(spec.Argv[0], spec.Env, spec.Dir)
	if status != 0 {
		p.notRun(status, lookPathProblem(spec.Argv[0], path, status))
		return p, nil
	}
	if err := p.start(path); err != nil {
		<-running
		return nil, err
	}
	if p.cmd == nil { // not executable after all
		return p, nil
	}
	go p.supervise()
	return p, nil
}

func checkSpec(spec *ProcSpec) error {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return wire.Errorf(wire.CodeInvalidInput, "runner: no command")
	}
	if spec.Timeout < 0 || spec.KillGrace < 0 || spec.MaxOutput < 0 {
		return wire.Errorf(wire.CodeInvalidInput, "runner: negative timeout, kill grace or output limit")
	}
	for _, s := range append(append([]string(nil), spec.Argv...), spec.Env...) {
		if strings.IndexByte(s, 0) >= 0 {
			return wire.Errorf(wire.CodeInvalidInput, "runner: NUL byte in an argument or environment variable")
		}
	}
	if spec.Dir != "" && spec.Sandbox == nil {
		if fi, err := os.Stat(spec.Dir); err != nil || !fi.IsDir() {
			return wire.Errorf(wire.CodeInvalidInput, "runner: working directory %s is not a directory", spec.Dir)
		}
	}
	if spec.KillGrace == 0 {
		spec.KillGrace = DefaultKillGrace
	}
	if spec.MaxOutput == 0 {
		spec.MaxOutput = DefaultMaxOutput
	}
	if spec.Env == nil {
		spec.Env = []string{} // nil would make os/exec inherit avfs's environment
	}
	return nil
}

// start forks and execs the command. It sets p.cmd only when the command is
// running; a program that turns out not to be executable ends p instead.
func (p *Proc) start(path string) error {
	pp, err := p.openPipes()
	if err != nil {
		return err
	}
	defer closeAll(pp.child...) // the child's ends, closed once it has them
	ours := pp.ours
	or, er, ow, ew := pp.outR, pp.errR, pp.stdout, pp.stderr
	var stdin io.Reader
	if pp.stdin != nil {
		stdin = pp.stdin
	}
	tr, err := newTracker(p.spec.Exclude)
	if err != nil {
		closeAll(ours...)
		return wire.Errorf(wire.CodeInternal, "runner: read /proc: %w", err)
	}
	restore, err := setSubreaper()
	if err != nil {
		closeAll(ours...)
		return wire.Errorf(wire.CodeInternal, "runner: become a child subreaper: %w", err)
	}
	cmd := &exec.Cmd{
		Path: path, Args: p.spec.Argv, Dir: p.spec.Dir, Env: p.spec.Env,
		Stdin: stdin, Stdout: ow, Stderr: ew,
		// A new session, hence a new process group: the group can be
		// signalled at once, the session tells the command's processes
		// apart from avfs's (see ProcSpec.Exclude), and the command has no
		// controlling terminal to block on.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	start := cmd.Start
	if p.spec.DirServed {
		cmd.Dir = ""
		if served(path, p.spec.Dir) {
			cmd.Path, cmd.Args = trampolineShell, trampoline(p.spec)
		} else {
			start = func() error {
				err := startIn(cmd, p.spec.Dir)
				if errors.Is(err, errNoUnshare) { // a seccomp filter, say: the shell does it
					cmd.Path, cmd.Args = trampolineShell, trampoline(p.spec)
					err = cmd.Start()
				}
				return err
			}
		}
	}
	p.started = time.Now()
	if err := start(); err != nil {
		restore()
		closeAll(ours...)
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Op == "chdir" {
			return wire.Errorf(wire.CodeInvalidInput, "runner: %w", err)
		}
		if status := startStatus(err, path); status != 0 {
			p.notRun(status, startProblem(err, path))
			return nil
		}
		return wire.Errorf(wire.CodeInternal, "runner: start %s: %w", p.spec.Argv[0], err)
	}
	p.pid = cmd.Process.Pid
	p.startStreams(or, er)
	if err := tr.setCommand(p.pid); err != nil { // cannot happen: the command is our child and not reaped
		unix.Kill(-p.pid, unix.SIGKILL)
		cmd.Wait()
		restore()
		closeAll(ours...)
		return wire.Errorf(wire.CodeInternal, "runner: read /proc for %d: %w", p.pid, err)
	}
	p.cmd, p.tr, p.restore = cmd, tr, restore
	return nil
}

// pipes are a command's standard streams as avfs sets them up.
type pipes struct {
	// stdin is the command's: nil for /dev/null; Stdin itself when it is
	// an *os.File; else a pipe that a goroutine copies Stdin into
	// (p.stdinW is its other end).
	stdin          *os.File
	stdout, stderr *os.File   // the command's ends of the output pipes
	outR, errR     *os.File   // avfs's ends, drained
	child, ours    []*os.File // the command's ends (closed once it has them), and avfs's
}

// openPipes makes the pipes of p's command; on failure nothing is left
// open.
func (p *Proc) openPipes() (*pipes, error) {
	pp := &pipes{}
	fail := func(err error) (*pipes, error) {
		closeAll(pp.child...)
		closeAll(pp.ours...)
		return nil, wire.Errorf(wire.CodeInternal, "runner: pipe: %w", err)
	}
	var err error
	if pp.outR, pp.stdout, err = os.Pipe(); err != nil {
		return fail(err)
	}
	pp.child, pp.ours = append(pp.child, pp.stdout), append(pp.ours, pp.outR)
	if pp.errR, pp.stderr, err = os.Pipe(); err != nil {
		return fail(err)
	}
	pp.child, pp.ours = append(pp.child, pp.stderr), append(pp.ours, pp.errR)
	switch r := p.spec.Stdin.(type) {
	case nil:
	case *os.File:
		pp.stdin = r
	default:
		sr, sw, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		pp.child, pp.ours = append(pp.child, sr), append(pp.ours, sw)
		pp.stdin, p.stdinW = sr, sw
	}
	return pp, nil
}

// startStreams starts draining the command's output pipes (avfs's ends
// or and er) and, for a Stdin that is not a file, copying it into the
// command's stdin pipe.
func (p *Proc) startStreams(or, er *os.File) {
	live1, live2, tees := liveStreams(p.spec.Stdout, p.spec.Stderr)
	p.stdout = startDrain(or, p.spec.MaxOutput, live1)
	p.stderr = startDrain(er, p.spec.MaxOutput, live2)
	p.tees = tees
	if p.stdinW != nil {
		go func(w *os.File, r io.Reader) {
			io.Copy(w, r)
			w.Close()
		}(p.stdinW, p.spec.Stdin)
	}
}

// startIn starts cmd with dir as its working directory without the child
// touching dir between fork and exec: a thread of its own, with its own
// working directory (unshare CLONE_FS), changes into dir like any other
// goroutine would (FUSE requests are served meanwhile), and forks there.
// The thread is never given back to the scheduler (it ends with the
// goroutine) and leaves dir once the child is forked. A dir it cannot change into is a *fs.PathError "chdir", as
// from exec.Cmd.
func startIn(cmd *exec.Cmd, dir string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // and never unlocked: the thread's cwd is dir
		if err := unshareFS(); err != nil {
			errc <- fmt.Errorf("%w: %w", errNoUnshare, err)
			return
		}
		if err := unix.Chdir(dir); err != nil {
			errc <- &fs.PathError{Op: "chdir", Path: dir, Err: err}
			return
		}
		err := cmd.Start()
		// The runtime ends a locked thread with its goroutine, except the
		// main thread, which it parks for good: that one must not keep the
		// mount busy.
		unix.Chdir("/")
		errc <- err
	}()
	return <-errc
}

// errNoUnshare is startIn's error when the thread cannot have a working
// directory of its own; nothing was started.
var errNoUnshare = errors.New("unshare CLONE_FS")

// unshareFS gives the calling thread its own working directory; a
// variable so that tests can make it fail.
var unshareFS = func() error { return unix.Unshare(unix.CLONE_FS) }

// served is true when the exec of path would read a file on dir's file
// system: path itself, or an interpreter its #! line names (for up to
// four levels, as the kernel follows). Such a command must go through the
// trampoline. An error counts as served: the shell then reports it.
func served(path, dir string) bool {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return true
	}
	dev := st.Dev
	for range 5 {
		if !filepath.IsAbs(path) || unix.Stat(path, &st) != nil || st.Dev == dev {
			return true
		}
		interp, ok := shebang(path)
		if !ok {
			return false
		}
		path = interp
	}
	return true
}

// shebang returns the interpreter named by the #! line of the file at path.
func shebang(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, ok := bytes.CutPrefix(buf[:n], []byte("#!"))
	if !ok {
		return "", false
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return "", false
	}
	return fields[0], true
}

// trampolineShell changes into a served directory for the command; see
// ProcSpec.DirServed.
const trampolineShell = "/bin/sh"

// trampoline is the argv that runs spec through trampolineShell: cd to
// Dir, put PWD and OLDPWD back as Env has them (cd sets both), and exec the
// command, which the shell looks up on Env's PATH as lookPath did. A cd that
// fails is 126, as for a command that cannot run.
func trampoline(spec ProcSpec) []string {
	script := `cd "$1" || exit 126; shift;`
	for _, k := range []string{"PWD", "OLDPWD"} {
		if v, ok := lookupOK(spec.Env, k); ok {
			script += " export " + k + "=" + shellQuote(v) + ";"
		} else {
			script += " unset " + k + ";"
		}
	}
	script += ` exec "$@"`
	return append([]string{"sh", "-c", script, "avfs", spec.Dir}, spec.Argv...)
}

// shellQuote quotes s as one word for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// Pid returns the command's pid (0 when it was not found).
func (p *Proc) Pid() int { return p.pid }

// Signal sends sig to the command's process group (as a terminal would), or
// to the command alone if an excluded process is in its group. It returns
// os.ErrProcessDone once the command has ended.
func (p *Proc) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return wire.Errorf(wire.CodeInvalidInput, "runner: unsupported signal %v", sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.reaped {
		return os.ErrProcessDone
	}
	target := -p.pid
	if p.groupExcluded.Load() || p.sb != nil { // the init passes it on to the whole run
		target = p.pid
	}
	if err := unix.Kill(target, s); err != nil {
		if err == unix.ESRCH {
			return os.ErrProcessDone
		}
		return wire.Errorf(wire.CodeInternal, "runner: signal %d: %w", p.pid, err)
	}
	return nil
}

// Wait waits until the command and all its processes have ended and the
// streams are drained, and returns the result (the same on every call).
func (p *Proc) Wait() (ProcResult, error) {
	<-p.done
	return p.res, p.err
}

// notRun ends p for a program that could not be started, with a line on
// its stderr saying why, as a shell prints one ("command not found").
func (p *Proc) notRun(status int, problem string) {
	msg := []byte("avfs: " + p.spec.Argv[0] + ": " + problem + "\n")
	if p.spec.Stderr != nil {
		p.spec.Stderr.Write(msg)
	}
	p.end(ProcResult{ExitCode: status, NotFound: true, Stderr: Output{Head: msg, Total: int64(len(msg))}}, nil)
}

// lookPathProblem says why lookPath found nothing to run.
func lookPathProblem(file, path string, status int) string {
	switch {
	case status == 127 && !strings.Contains(file, "/"):
		return "command not found"
	case status == 127:
		return "no such file or directory"
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "is a directory"
	}
	return "permission denied"
}

// startProblem says why the exec of path failed.
func startProblem(err error, path string) string {
	var errno syscall.Errno
	errors.As(err, &errno)
	if errno == syscall.ENOENT {
		if _, serr := os.Stat(path); serr == nil {
			return "bad interpreter: the program its #! line names is not there"
		}
	}
	if errno != 0 {
		return errno.Error()
	}
	return err.Error()
}

// Missing reports that argv0 names no program on the PATH in env, so that
// nothing would run: it has no slash, and no PATH entry (all absolute)
// holds it. False when that cannot be known before the run's directory is
// there: a name with a slash, a relative PATH entry, or any PATH entry
// when under is set (the run's --mountpoint, which PATH may point into).
func Missing(argv0 string, env []string, under string) bool {
	if argv0 == "" || strings.Contains(argv0, "/") || under != "" {
		return false
	}
	pathList := "/bin:/usr/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v
		}
	}
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) || checkExec(filepath.Join(d, argv0), true) != 127 {
			return false
		}
	}
	return true
}

// end records the result and lets the next command start.
func (p *Proc) end(res ProcResult, err error) {
	p.res, p.err = res, err
	if p.token {
		<-running
	}
	close(p.done)
}

// supervise follows the command until it exits, times out or is cancelled,
// ends what is left of it, and collects the result.
func (p *Proc) supervise() {
	exited := make(chan struct{})
	go func() {
		waitExited(p.pid)
		close(exited)
	}()
	var deadline <-chan time.Time
	if p.spec.Timeout > 0 {
		t := time.NewTimer(p.spec.Timeout - time.Since(p.started))
		defer t.Stop()
		deadline = t.C
	}
	// The first scan comes after pollInterval: a command that is over by
	// then never pays for one (see terminate).
	tick := time.NewTicker(pollInterval)
	tr := p.tr
	timedOut := false
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-deadline:
			timedOut = true
			break wait
		case <-p.ctx.Done():
			break wait
		case <-tick.C:
			tr.scan()
			tr.reap()
			p.groupExcluded.Store(tr.groupExcluded)
			tick.Reset(tr.interval())
		}
	}
	tick.Stop()
	over := false
	select {
	case <-exited: // it ended by itself after all
		timedOut, over = false, true
	default:
	}
	first, interrupted := unix.SIGTERM, ""
	var in Interrupted
	if !over && !timedOut && errors.As(context.Cause(p.ctx), &in) {
		first = in.Signal // forwarded: Ctrl-C reaches the command as SIGINT
		interrupted = unix.SignalName(in.Signal)
	}
	killed, end, stuck := p.terminate(over, first)

	var res ProcResult
	var err error
	p.mu.Lock()
	p.reaped = true // from here on the pid may be reused
	p.mu.Unlock()
	if stuck[p.pid] {
		go p.cmd.Wait() // reaps it if it ever dies
		res.ExitCode = -1
	} else {
		<-exited
		p.cmd.Wait()
		ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
			res.Signal = unix.SignalName(ws.Signal())
		} else {
			res.ExitCode = ws.ExitStatus()
		}
	}
	if len(stuck) > 0 {
		pids := slices.Sorted(maps.Keys(stuck))
		err = wire.Errorf(wire.CodeInternal, "runner: processes %v did not end after SIGKILL", pids).With("pids", pids)
	}
	p.restore()
	res.Killed = killed
	p.finish(res, err, timedOut, interrupted, end)
}

// finish drains the streams once the command's processes are gone and
// ends p with res, completed with how it ended and its output. The pipes
// reach EOF once no process holds them; one that escaped (say an excluded
// process that inherited them) is cut off after drainWait.
func (p *Proc) finish(res ProcResult, err error, timedOut bool, interrupted string, end time.Time) {
	closeAll(p.stdinW)
	timer := time.NewTimer(drainWait)
	for _, d := range []*drain{p.stdout, p.stderr} {
		select {
		case <-d.done:
		case <-timer.C:
			p.stdout.r.Close()
			p.stderr.r.Close()
			<-d.done
		}
	}
	timer.Stop()
	p.stdout.r.Close()
	p.stderr.r.Close()
	for _, t := range p.tees {
		t.close(teeWait)
	}
	res.TimedOut, res.Interrupted = timedOut, interrupted
	res.Duration = end.Sub(p.started)
	res.Stdout = p.stdout.cap.output()
	res.Stdout.LiveDropped = p.stdout.live.droppedBytes()
	res.Stderr = p.stderr.cap.output()
	res.Stderr.LiveDropped = p.stderr.live.droppedBytes()
	p.end(res, err)
}

// terminate ends every live process of the command, the command included:
// first (SIGTERM, or the signal avfs received) and SIGCONT (so stopped
// processes see it), and SIGKILL to what is left after KillGrace, repeated
// until nothing is left or killWait has passed. Processes found meanwhile
// get the same treatment.
// It returns the descendants it signalled, the time the last process
// ended, and the processes that would not die. exited says the command
// itself has exited; when it was avfs's only child, nothing is left and no
// scan is needed.
func (p *Proc) terminate(exited bool, first unix.Signal) (killed []int, end time.Time, stuck map[int]bool) {
	tr := p.tr
	if exited && tr.onlyChild() {
		return nil, time.Now(), nil
	}
	tr.scan()
	tr.reap()
	alive := tr.alive(true)
	if len(alive) == 0 {
		return nil, time.Now(), nil
	}
	signalled := map[int]bool{}
	note := func(pids []int) (fresh []int) {
		for _, pid := range pids {
			if !signalled[pid] {
				signalled[pid] = true
				fresh = append(fresh, pid)
				if pid != p.pid {
					killed = append(killed, pid)
				}
			}
		}
		return fresh
	}
	note(alive)
	tr.signalAll(first)
	tr.signalAll(unix.SIGCONT)
	graceEnd := time.Now().Add(p.spec.KillGrace)
	var killEnd time.Time
	for {
		wait := tr.interval()
		if killEnd.IsZero() {
			wait = max(min(wait, time.Until(graceEnd)), time.Millisecond)
		}
		time.Sleep(wait)
		tr.scan()
		tr.reap()
		alive = tr.alive(true)
		now := time.Now()
		if len(alive) == 0 {
			return killed, now, nil
		}
		fresh := note(alive)
		switch {
		case killEnd.IsZero() && now.Before(graceEnd):
			for _, pid := range fresh {
				tr.signalPid(pid, tr.ours[pid], first)
				tr.signalPid(pid, tr.ours[pid], unix.SIGCONT)
			}
		case killEnd.IsZero() || now.Before(killEnd):
			if killEnd.IsZero() {
				killEnd = now.Add(killWait)
			}
			tr.signalAll(unix.SIGKILL)
		default:
			stuck = map[int]bool{}
			for _, pid := range alive {
				stuck[pid] = true
			}
			return killed, now, stuck
		}
	}
}

// lookPath finds the program like execvp, but on the PATH in env, and
// returns its absolute path, or 127 (not found) or 126 (found but not
// executable).
func lookPath(file string, env []string, dir string) (string, int) {
	base := dir
	if base == "" {
		base, _ = os.Getwd()
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	if strings.Contains(file, "/") {
		p := abs(file)
		return p, checkExec(p, false)
	}
	pathList := "/bin:/usr/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v // the last one wins, as in os/exec
		}
	}
	status := 127
	for _, d := range filepath.SplitList(pathList) {
		if d == "" {
			d = "."
		}
		p := abs(filepath.Join(d, file))
		switch checkExec(p, true) {
		case 0:
			return p, 0
		case 126:
			status = 126
		}
	}
	return "", status
}

// checkExec returns 0 when p is an executable file, else 127 or 126 as a
// shell would. A directory found on the PATH counts as not found.
func checkExec(p string, onPath bool) int {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG):
		return 127
	case err != nil:
		return 126
	case fi.IsDir() && onPath:
		return 127
	case fi.IsDir() || unix.Access(p, unix.X_OK) != nil:
		return 126
	}
	return 0
}

// startStatus maps an exec failure to 127 or 126, or 0 when the failure is
// avfs's (out of processes or file descriptors...).
func startStatus(err error, path string) int {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0
	}
	switch errno {
	case syscall.ENOENT:
		if _, err := os.Stat(path); err == nil {
			return 126 // the file is there: its interpreter is not
		}
		return 127
	case syscall.ENOTDIR, syscall.ENAMETOOLONG:
		return 127
	case syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.EISDIR, syscall.ETXTBSY, syscall.ELOOP, syscall.ELIBBAD:
		return 126
	}
	return 0
}
