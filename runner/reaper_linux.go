package runner

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procInfo is what the tracker reads from /proc/PID/stat.
type procInfo struct {
	pid, ppid, pgid, sid int
	start                uint64 // clock ticks after boot
	state                byte
}

func (p procInfo) alive() bool { return p.state != 'Z' && p.state != 'X' }

// class is what a process is to the tracker.
type class int8

const (
	unrelated class = iota // not a descendant of avfs
	ours                   // the command or a process it started
	foreign                // a descendant of avfs that is not the command's
)

// tracker finds the processes of one command (see ProcSpec.Exclude for the
// rule), signals them and reaps the ones reparented to avfs. It is used from
// one goroutine.
type tracker struct {
	self, selfSid int
	cmd           int    // pid of the command; also its session and group id
	cmdStart      uint64 // the command's start time
	exclude       func(pid int) bool

	ours    map[int]uint64 // pid -> start time of every process seen to be ours
	foreign map[int]uint64 // the same for avfs's other descendants
	procs   map[int]procInfo
	memo    map[int]class

	// groupExcluded: an excluded process is in the command's group, so the
	// group is signalled member by member instead of with kill(-pgid).
	groupExcluded bool
	buf           []byte
	took          time.Duration // by the last scan
}

// newTracker reads /proc before the command starts: avfs's descendants that
// exist then are the caller's, whatever their start time.
func newTracker(exclude func(int) bool) (*tracker, error) {
	t := &tracker{
		self: os.Getpid(), exclude: exclude,
		ours: map[int]uint64{}, foreign: map[int]uint64{},
		procs: map[int]procInfo{}, memo: map[int]class{},
		buf: make([]byte, 1024),
	}
	me, err := t.readStat(t.self)
	if err != nil {
		return nil, err
	}
	t.selfSid = me.sid
	if !hasChildren() {
		return t, nil // no descendants: nothing is the caller's
	}
	t.readProcs()
	for pid, p := range t.procs {
		for q, n := p, 0; n < 1000 && q.ppid > 0 && q.pid != q.ppid; n++ {
			if q.ppid == t.self {
				t.foreign[pid] = p.start
				break
			}
			if q = t.procs[q.ppid]; q.pid == 0 {
				break
			}
		}
	}
	return t, nil
}

// setCommand records the started command.
func (t *tracker) setCommand(pid int) error {
	c, err := t.readStat(pid)
	if err != nil {
		return err
	}
	t.cmd, t.cmdStart = pid, c.start
	t.ours[pid] = c.start
	delete(t.foreign, pid)
	return nil
}

// readStat parses /proc/PID/stat.
func (t *tracker) readStat(pid int) (procInfo, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procInfo{}, err
	}
	n, err := unix.Read(fd, t.buf)
	unix.Close(fd)
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(pid, t.buf[:n])
}

var errStat = errors.New("malformed /proc/PID/stat")

func parseStat(pid int, b []byte) (procInfo, error) {
	// "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime ..."; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, errStat
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, errStat
	}
	p := procInfo{pid: pid, state: f[0][0]}
	var err error
	num := func(s []byte) int {
		v, e := strconv.Atoi(string(s))
		if e != nil {
			err = e
		}
		return v
	}
	p.ppid, p.pgid, p.sid = num(f[1]), num(f[2]), num(f[3])
	p.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil || p.start == 0 {
		return procInfo{}, errStat
	}
	return p, nil
}

// scan reads every process in /proc and classifies it.
func (t *tracker) scan() {
	t0 := time.Now()
	defer func() { t.took = time.Since(t0) }()
	if !t.readProcs() {
		return
	}
	procs := t.procs
	// Forget pids that are gone or now name another process.
	for _, reg := range []map[int]uint64{t.ours, t.foreign} {
		for pid, start := range reg {
			if p, ok := procs[pid]; !ok || p.start != start {
				delete(reg, pid)
			}
		}
	}
	clear(t.memo)
	t.groupExcluded = false
	for pid := range procs {
		t.classify(pid)
	}
}

// classify applies the ownership rule (see ProcSpec.Exclude) to one process
// of the last scan, records ours and foreign processes, and returns its class.
func (t *tracker) classify(pid int) class {
	if c, ok := t.memo[pid]; ok {
		return c
	}
	t.memo[pid] = unrelated // breaks cycles (pid reuse during the scan)
	p := t.procs[pid]
	var c class
	switch start, ok := t.ours[pid]; {
	case ok && start == p.start:
		c = ours
	case t.foreign[pid] == p.start && p.start != 0:
		c = foreign
	case p.sid == t.cmd:
		c = ours // only the command's descendants are in its session
	case p.ppid == t.self:
		// A child of avfs: the caller's, or an orphan of the command's that
		// was reparented to the subreaper before a scan saw its parents.
		if p.start < t.cmdStart || p.sid == t.selfSid {
			c = foreign
		} else {
			c = ours
		}
	default:
		if _, ok := t.procs[p.ppid]; ok && p.ppid != pid {
			c = t.classify(p.ppid)
		}
	}
	if c == ours && pid != t.cmd && t.excluded(p) {
		c = foreign
		if p.pgid == t.cmd {
			t.groupExcluded = true
		}
	}
	switch c {
	case ours:
		t.ours[pid] = p.start
	case foreign:
		t.foreign[pid] = p.start
		delete(t.ours, pid)
	}
	t.memo[pid] = c
	return c
}

// excluded asks Exclude about p's pid, group and session; never about the
// command's own group and session (the caller may hold a stale pid that the
// command now has).
func (t *tracker) excluded(p procInfo) bool {
	if t.exclude == nil {
		return false
	}
	for _, id := range [...]int{p.pid, p.pgid, p.sid} {
		if id != t.cmd && t.exclude(id) {
			return true
		}
	}
	return false
}

// readProcs reads every process in /proc into t.procs.
func (t *tracker) readProcs() bool {
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return false
	}
	clear(t.procs)
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, err := t.readStat(pid); err == nil {
			t.procs[pid] = p
		}
	}
	return true
}

// interval is the time to wait before the next scan: pollInterval, or ten
// times what the last scan took (up to maxPollInterval) on a machine with
// so many processes that scanning every pollInterval would be expensive.
func (t *tracker) interval() time.Duration {
	return min(max(pollInterval, 10*t.took), maxPollInterval)
}

// alive returns the pids of the command's processes that have not exited in
// the last scan, sorted, without the command itself unless withCmd.
func (t *tracker) alive(withCmd bool) []int {
	var pids []int
	for pid := range t.ours {
		if p := t.procs[pid]; p.alive() && (withCmd || pid != t.cmd) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// signalAll sends sig to every live process of the command: to its process
// group with one kill (so processes forked meanwhile get it too) and to each
// tracked process outside the group by pid (see signalPid).
func (t *tracker) signalAll(sig unix.Signal) {
	if !t.groupExcluded {
		unix.Kill(-t.cmd, sig)
	}
	for pid, start := range t.ours {
		if p := t.procs[pid]; p.alive() && (p.pgid != t.cmd || t.groupExcluded) {
			t.signalPid(pid, start, sig)
		}
	}
}

// signalPid signals one tracked process through a pidfd checked against the
// recorded start time, so that a reused pid is never signalled.
func (t *tracker) signalPid(pid int, start uint64, sig unix.Signal) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil && !errors.Is(err, unix.ENOSYS) {
		return // gone
	}
	if p, err := t.readStat(pid); err != nil || p.start != start || !p.alive() {
		if fd >= 0 {
			unix.Close(fd)
		}
		return
	}
	if fd < 0 { // no pidfds (Linux < 5.3): checked kill, with a tiny race
		unix.Kill(pid, sig)
		return
	}
	unix.PidfdSendSignal(fd, sig, nil, 0)
	unix.Close(fd)
}

// reap waits for the command's exited processes that were reparented to
// avfs, each by its own pid (never wait4(-1): the caller's children are
// left alone). The command itself is left to exec.Cmd.
func (t *tracker) reap() {
	for pid := range t.ours {
		p := t.procs[pid]
		if pid == t.cmd || p.alive() || p.ppid != t.self {
			continue
		}
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if err != unix.EINTR {
				break
			}
		}
		delete(t.ours, pid)
	}
}

// hasChildren is true unless avfs has no child process at all.
func hasChildren() bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err != unix.ECHILD
		}
	}
}

// onlyChild is true when the command, exited, is avfs's only child: then
// no process of the command is left, for the subreaper (avfs) inherited
// the children of every process of the command that exited, so a live
// one would have an ancestor among avfs's children. It reads the children
// of avfs's threads; false when it cannot, or when a thread came or went
// meanwhile (a thread's children move to another when it exits).
func (t *tracker) onlyChild() bool {
	tasks := func() []string {
		d, err := os.Open("/proc/self/task")
		if err != nil {
			return nil
		}
		defer d.Close()
		names, err := d.Readdirnames(-1)
		if err != nil {
			return nil
		}
		slices.Sort(names)
		return names
	}
	before := tasks()
	if before == nil {
		return false
	}
	for _, tid := range before {
		b, err := os.ReadFile("/proc/self/task/" + tid + "/children")
		if err != nil {
			return false
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err != nil || pid != t.cmd {
				return false
			}
		}
	}
	return slices.Equal(before, tasks())
}

// waitExited blocks until pid has exited, without reaping it: while it is a
// zombie its pid, session and group id cannot be reused.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// setSubreaper makes avfs a child subreaper and returns a function that
// restores the previous setting.
func setSubreaper() (restore func(), err error) {
	// PR_GET_CHILD_SUBREAPER stores an int at the address in arg2 (on the
	// heap, which the garbage collector does not move).
	prev := new(int32)
	err = unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(prev)), 0, 0, 0)
	runtime.KeepAlive(prev)
	if err != nil {
		return nil, err
	}
	if *prev != 0 {
		return func() {}, nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, err
	}
	return func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }, nil
}
