package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/mount"
)

// GuardDelay is how long a command runs in a FUSE mount before avfs starts
// its guard. A run that ends sooner never pays for one; a longer one is
// cleaned up by the guard if avfs is killed.
const GuardDelay = 50 * time.Millisecond

// guardDone is what avfs writes to its guard when the run ended normally.
const guardDone = "done\n"

// guard is a helper process (`avfs proxy guard`) that outlives a killed
// avfs: the mount is served by avfs itself, so when avfs dies the mount goes
// dead, and the guard then ends the run's processes still inside it,
// detaches the mount and removes the run's directory. It learns of avfs's
// death by the end of its stdin pipe, which the kernel closes with avfs.
type guard struct {
	exe, base string

	mu      sync.Mutex
	timer   *time.Timer
	cmd     *exec.Cmd
	ctl     io.WriteCloser
	stopped bool
}

// startGuard schedules the guard of the run in base; stop cancels it.
func startGuard(exe, base string) *guard {
	g := &guard{exe: exe, base: base}
	g.timer = time.AfterFunc(GuardDelay, g.spawn)
	return g
}

func (g *guard) spawn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	if g.exe == "" {
		return // no guard: the next run cleans up instead
	}
	cmd := exec.Command(g.exe, "proxy", "guard", g.base)
	// Its own process group keeps a terminal's Ctrl-C from it; it stays in
	// avfs's session, so the command's process tracking leaves it alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ctl, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		ctl.Close()
		return
	}
	g.cmd, g.ctl = cmd, ctl
}

// stop tells the guard the run ended normally and waits for it to go.
func (g *guard) stop() {
	g.timer.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.cmd == nil {
		return
	}
	_, _ = io.WriteString(g.ctl, guardDone)
	g.ctl.Close()
	_ = g.cmd.Wait()
	g.cmd = nil
}

// guardLockWait is how long a guard waits for the lock of its run once
// its stdin has ended: the kernel closes the pipe and the lock's file as
// avfs exits, in no set order, so the lock may still be held for a moment.
// A lock held longer is a live run's (the pipe ended some other way) or
// another cleaner's: the guard then leaves it.
var guardLockWait = 5 * time.Second

// Guard is `avfs proxy guard BASE`: it waits until ctl (its stdin, the
// other end held by the avfs of the run in BASE) ends. Without a done line
// first, that avfs died: Guard takes the run's lock (so it never cleans a
// run that is still alive, nor races another cleaner) and cleans up after
// it (see cleanRun). ctx ending (the guard itself is told to stop) ends
// the wait without cleaning up: the run's avfs may still be alive.
//
// BASE is only acted on when it is a run directory: exec-* in a run root
// that passes OpenRunDir's checks, a real directory owned by avfs's user.
func Guard(ctx context.Context, ctl io.Reader, base string) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(ctl).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != guardDone {
			cleanGuarded(base)
		}
	case <-ctx.Done():
	}
}

// cleanGuarded cleans the run in base, if base is a run directory whose
// lock comes free within guardLockWait.
func cleanGuarded(base string) {
	if !safeTarget(base) || !strings.HasPrefix(filepath.Base(base), runPrefix) {
		return
	}
	if _, err := openRunDir(filepath.Dir(base), false); err != nil || !isRunDir(base) {
		return
	}
	lock, err := lockRun(base, guardLockWait)
	if err != nil {
		return
	}
	defer lock.Close()
	cleanRun(base)
}

// cleanRun cleans up after the run in the run directory dir, whose lock
// the caller holds (its avfs is gone). What the record (mountpointFile)
// names is only acted on as far as avfs can prove it made it:
//
//   - The run's directory (<dir>/root, or the --mountpoint of the record)
//     is unmounted only when it is an avfs FUSE mount (fuse.*, source
//     avfs:<the run's vault>), after the processes inside that mount are
//     killed: those whose working directory, root, executable or open file
//     is on the mount's device, not merely under its path (a process that
//     sat in the directory before the mount hid it is left alone).
//   - In a materialised copy (in the run directory, or at a --mountpoint
//     that is still the directory the record identifies), only the
//     processes of the run are killed: those inside it that carry the
//     run's AVFS_MOUNTPOINT.
//   - At a --mountpoint, a directory avfs made, or an empty one it filled
//     and emptied, is removed (or emptied and given its mode back) only
//     when it is still the very directory the record identifies (see
//     removeAt); a mount point avfs made only when it is empty.
//   - The run directory goes last, unless something is still mounted in
//     it (removal would descend into the mount) or the run's avfs mount
//     would not go (the record is kept for the next try).
//
// It never acts on /, on a path that is not absolute and clean, or on a
// record that is a symlink or not avfs's user's. It reports nothing: what
// it cannot clean is left for the next run.
func cleanRun(dir string) {
	root := filepath.Join(dir, "root")
	mp, ok := readRecord(dir)
	if !ok {
		mp = mountpointRecord{Dir: root}
	}
	m, isAvfs, err := avfsMountAt(mp.Dir)
	if err != nil {
		return
	}
	if isAvfs && (mp.FsName == "" || m.Source == mp.FsName) {
		killHolders(mp.Dir, 2*time.Second, onDevice(m)) // before a dead mount is detached, while their paths still show where they are
		_ = mount.CleanStale(mp.Dir)
		if mount.IsMounted(mp.Dir) {
			if mount.Unmount(mp.Dir, false) != nil {
				_ = mount.Unmount(mp.Dir, true)
			}
		}
		if mount.IsMounted(mp.Dir) {
			return
		}
	}
	if mp.Materialized && (mp.Dir == root || mp.ID.at(mp.Dir)) {
		killHolders(mp.Dir, 2*time.Second, runProcess(mp.Dir))
	}
	if mp.Dir != root {
		w := &workspace{dir: mp.Dir, base: dir, made: mp.Made, kept: fs.FileMode(mp.Kept), ident: mp.ID}
		if mp.Materialized {
			w.mode = "materialized"
		}
		_ = w.removeCopy()
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) > 0 {
		return
	}
	os.RemoveAll(dir)
}

// readRecord reads the record of the run in dir: a regular file owned by
// avfs's user, opened without following a symlink, naming an absolute,
// clean path other than /. ok is false when there is none fit to use.
func readRecord(dir string) (rec mountpointRecord, ok bool) {
	f, err := os.OpenFile(filepath.Join(dir, mountpointFile), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return rec, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 64<<10 {
		return rec, false
	}
	if st, isUnix := fi.Sys().(*syscall.Stat_t); !isUnix || st.Uid != uint32(os.Geteuid()) {
		return rec, false
	}
	b, err := io.ReadAll(f)
	if err != nil || json.Unmarshal(b, &rec) != nil || !safeTarget(rec.Dir) {
		return mountpointRecord{}, false
	}
	return rec, true
}

// mountpointFile, in a run's directory, records where the run's command
// works and how it got there, for whoever cleans up after a killed avfs.
const mountpointFile = "mountpoint.json"

type mountpointRecord struct {
	Dir          string `json:"dir"` // what the command saw: <run dir>/root or the --mountpoint
	Materialized bool   `json:"materialized"`
	Made         bool   `json:"made"`             // avfs made Dir (a --mountpoint)
	Kept         uint32 `json:"kept"`             // the mode of the empty --mountpoint a copy was made in
	FsName       string `json:"fsname,omitempty"` // the FUSE mount's source (avfs:<vault>)
	ID           *dirID `json:"id,omitempty"`     // the identity of a --mountpoint avfs made or filled
}

// runProcess matches the processes of the run whose command saw dir: they
// carry AVFS_MOUNTPOINT=dir (avfs gives it to every command; a process
// that dropped it is left alone).
func runProcess(dir string) func(pid int, link string) bool {
	want := []byte("AVFS_MOUNTPOINT=" + dir)
	return func(pid int, _ string) bool {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return false
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				return true
			}
		}
		return false
	}
}

// killHolders SIGKILLs the processes one of whose working directory, root,
// executable or open files is dir or under it, and for which in(pid, the
// /proc link) holds, until none is left or wait has passed. It never
// signals avfs itself.
//
// A pid can end and be reused between the look at /proc and the signal:
// each process found is looked at again through a pidfd opened after the
// first look and signalled through that pidfd, so a process that took a
// holder's pid is never signalled (it would have to pass the second look).
// Kernels without pidfds (before 5.3) get a plain kill after the second
// look.
func killHolders(dir string, wait time.Duration, in func(pid int, link string) bool) {
	deadline := time.Now().Add(wait)
	for {
		n := 0
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			if err != nil || pid == os.Getpid() || !holds(pid, dir, in) {
				continue
			}
			pidfd, err := unix.PidfdOpen(pid, 0)
			switch {
			case err == nil:
				if holds(pid, dir, in) {
					n++
					_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
				}
				unix.Close(pidfd)
			case errors.Is(err, unix.ENOSYS):
				if holds(pid, dir, in) {
					n++
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		if n == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holds reports whether process pid holds something under dir that in
// accepts.
func holds(pid int, dir string, in func(pid int, link string) bool) bool {
	under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	base := fmt.Sprintf("/proc/%d", pid)
	links := []string{base + "/cwd", base + "/root", base + "/exe"}
	if fds, err := os.ReadDir(base + "/fd"); err == nil {
		for _, fd := range fds {
			links = append(links, base+"/fd/"+fd.Name())
		}
	}
	for _, l := range links {
		if t, err := os.Readlink(l); err == nil && under(t) && in(pid, l) {
			return true
		}
	}
	return false
}

// onDevice accepts a /proc link (a process's cwd, root, exe or fd) on
// m's device. statx with an empty mask and AT_STATX_DONT_SYNC asks the
// file system nothing, so a dead FUSE mount (whose server is gone) still
// answers, and one the caller may not enter too.
func onDevice(m mount.Entry) func(pid int, link string) bool {
	return func(_ int, link string) bool {
		var sx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, link, unix.AT_STATX_DONT_SYNC, 0, &sx); err != nil {
			return false
		}
		return sx.Dev_major == m.Major && sx.Dev_minor == m.Minor
	}
}

// avfsMountAt is the mount on top at dir (absolute and clean), if it is
// an avfs FUSE mount.
func avfsMountAt(dir string) (mount.Entry, bool, error) {
	m, found, err := mount.MountAt(dir)
	if err != nil || !found || !m.Avfs() {
		return mount.Entry{}, false, err
	}
	return m, true, nil
}

// mountsUnder lists the mount points that are dir or under it.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mount.Mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Dir == dir || strings.HasPrefix(m.Dir, dir+"/") {
			out = append(out, m.Dir)
		}
	}
	return out, nil
}
