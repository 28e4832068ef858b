package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"avfs/vault"
	"avfs/wire"
)

// Options tune a mount.
type Options struct {
	ReadOnly     bool
	FsName       string        // source shown in the mount table; "avfs:" is prefixed unless it starts so (default "avfs:")
	AllowOther   bool          // let other users reach the mount (needs user_allow_other for non-root)
	SpillDir     string        // where open files spill unflushed chunks (default os.TempDir())
	SpillLimit   int64         // most bytes of spill files at once; beyond, writes fail with ENOSPC (0: bounded only by SpillDir's free space, less a margin)
	EntryTimeout time.Duration // kernel cache time of names (default: see WriterCacheTime)
	AttrTimeout  time.Duration // kernel cache time of attributes (default: see WriterCacheTime)
	Debug        bool          // log every FUSE request (go-fuse's debug output, on stderr)
}

// WriterCacheTime is how long the kernel may trust what a writer mount
// told it (names, attributes and names that do not exist) before asking
// again. A writer mount is the only writer of its vault: other processes'
// changes to its tree are refused while it lives (vault_busy), and every
// change reaches it through the kernel, which updates or drops what it
// cached. So `stat` storms, `rm -rf` and tools probing for files that do
// not exist (interpreters searching their import paths) are answered from
// the kernel's caches.
//
// A read-only mount does not block writers, so it asks again after
// ReaderCacheTime and never caches a missing name.
const (
	WriterCacheTime = time.Hour
	ReaderCacheTime = time.Second
)

// cacheTimes are the entry, attribute and negative entry timeouts of a
// mount with opts.
func cacheTimes(opts Options) (entry, attr, negative time.Duration) {
	entry, attr, negative = WriterCacheTime, WriterCacheTime, WriterCacheTime
	if opts.ReadOnly {
		entry, attr, negative = ReaderCacheTime, ReaderCacheTime, 0
	}
	if opts.EntryTimeout != 0 {
		entry = opts.EntryTimeout
	}
	if opts.AttrTimeout != 0 {
		attr = opts.AttrTimeout
	}
	return entry, attr, negative
}

// State is where a mount session is in its life.
type State int

// The states of a session: Unmounted → Mounting → Mounted → Unmounting → Unmounted.
const (
	StateUnmounted State = iota
	StateMounting
	StateMounted
	StateUnmounting
)

func (s State) String() string {
	return [...]string{"unmounted", "mounting", "mounted", "unmounting"}[s]
}

// Session is one mount of a vault.
type Session struct {
	dir   string
	store Store
	opts  Options

	mu     sync.Mutex
	state  State
	server *fuse.Server
	locked bool
	done   chan struct{}
	panics int
	lost   error // why files created in the mount were not committed when it went
	root   *node // set before the mount is served
}

// ErrNotPermitted is the cause of the fuse_unavailable error of a mount
// that was refused although /dev/fuse opens: EPERM or EACCES from
// mount(2), or fusermount failing, as in a container without
// CAP_SYS_ADMIN. Available cannot see this; only mounting tells.
var ErrNotPermitted = errors.New("mounting is not permitted here")

// NotPermitted is the fuse_unavailable error, wrapping ErrNotPermitted
// and cause, of a mount at dir that was refused.
func NotPermitted(dir string, cause error) error {
	return wire.Errorf(wire.CodeFuseUnavailable, "mount %s: %w (%w): a container without CAP_SYS_ADMIN, say", dir, ErrNotPermitted, trimmed{cause}).With("dir", dir)
}

// trimmed is an error without the white space its message ends with (go-fuse's
// "fusermount exited with code 256\n").
type trimmed struct{ err error }

func (t trimmed) Error() string { return strings.TrimSpace(t.err.Error()) }
func (t trimmed) Unwrap() error { return t.err }

// Available reports whether FUSE can be used by this process, as a
// fuse_unavailable error that says how to fix it: /dev/fuse opens, and a
// non-root user has fusermount3 (or fusermount). It does not mount, so it
// says yes where mounting is refused (a container given /dev/fuse but
// not CAP_SYS_ADMIN); Mount then fails with ErrNotPermitted.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return wire.Errorf(wire.CodeFuseUnavailable, "FUSE is not available: /dev/fuse does not exist (load the fuse module, or run the container with --device /dev/fuse)")
		case errors.Is(err, os.ErrPermission):
			return wire.Errorf(wire.CodeFuseUnavailable, "FUSE is not available: no permission to open /dev/fuse (run as root, or add the user to the group that owns it)")
		}
		return wire.Errorf(wire.CodeFuseUnavailable, "FUSE is not available: %v", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			if _, err2 := exec.LookPath("fusermount"); err2 != nil {
				return wire.Errorf(wire.CodeFuseUnavailable, "FUSE is not available: mounting as a non-root user needs fusermount3 (install the fuse3 package)")
			}
		}
	}
	return nil
}

// Mount serves store at dir until Unmount (or an unmount from outside).
// dir must be an existing directory; a stale mount left there by a killed
// process is cleaned up first. A writer mount takes the vault's mount lock:
// a second one fails with vault_busy. A mount the kernel or fusermount
// refuses fails with fuse_unavailable wrapping ErrNotPermitted (see
// NotPermitted), having printed nothing.
func Mount(ctx context.Context, store Store, dir string, opts Options) (*Session, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInvalidInput, "mount: %v", err)
	}
	if err := CleanStale(abs); err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return nil, wire.Errorf(wire.CodeInvalidInput, "mount: %s is not a directory", dir).With("dir", dir)
	}
	if IsMounted(abs) {
		return nil, wire.Errorf(wire.CodeMountFailed, "mount: %s is already a mount point", abs).With("dir", abs)
	}
	s := &Session{dir: abs, store: store, opts: opts, state: StateMounting, done: make(chan struct{})}
	if !opts.ReadOnly {
		if err := store.Lock(ctx, vault.LockMount, abs); err != nil {
			return nil, fmt.Errorf("mount: %w", err)
		}
		s.locked = true
		// The mount may write for hours (builds, installs): the vault
		// keeps its history bounded meanwhile, in the background, and
		// checkpoints its log there too, off the write path and out of
		// unmount.
		store.StartRetention()
		store.StartCheckpointer()
	}
	if err := s.serve(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Session) serve() error {
	spill := s.opts.SpillDir
	if spill == "" {
		spill = os.TempDir()
	}
	buf := &buffers{dir: spill, limit: max(0, s.opts.SpillLimit)}
	root := &node{fsys: &fsys{store: s.store, readonly: s.opts.ReadOnly, spillDir: spill, uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), buf: buf}, ino: vault.RootIno}
	if !s.opts.ReadOnly {
		root.fsys.stager = newStager(s.store)
	}
	s.root = root
	entry, attr, negative := cacheTimes(s.opts)
	name := s.opts.FsName
	if !strings.HasPrefix(name, FsNamePrefix) {
		name = FsNamePrefix + name // how IsAvfsMount knows it
	}
	mo := []string{"default_permissions"}
	if s.opts.ReadOnly {
		mo = append(mo, "ro")
	}
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName: name,
			Name:   "avfs",
			// Root mounts with mount(2) and nothing else: its errno is
			// what tells a refused mount, and go-fuse's retry through
			// fusermount (refused the same way) would print fusermount's
			// complaint on our stderr.
			DirectMountStrict: os.Geteuid() == 0,
			AllowOther:        s.opts.AllowOther,
			Options:           mo,
			MaxWrite:          1 << 20,
			MaxReadAhead:      1 << 20,
			Debug:             s.opts.Debug,
			PanicHandler: func(any) fuse.Status {
				s.mu.Lock()
				s.panics++
				s.mu.Unlock()
				return fuse.EIO
			},
		},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		UID:             uint32(os.Getuid()),
		GID:             uint32(os.Getgid()),
		// A stored mode of 0 is reported as 0, not as 0644/0755, so the
		// kernel's default_permissions refuses a chmod 000 file to its owner.
		NullPermissions: true,
	}
	server, err := fs.Mount(s.dir, root, fo)
	if err != nil && root.fsys.stager != nil {
		root.fsys.stager.stop()
	}
	if err != nil {
		if refused(err) {
			return NotPermitted(s.dir, err)
		}
		return wire.Errorf(wire.CodeMountFailed, "mount %s: %v", s.dir, err).With("dir", s.dir)
	}
	if err := closeFUSEOnExec(); err != nil {
		_ = server.Unmount()
		if root.fsys.stager != nil {
			root.fsys.stager.stop()
		}
		return wire.Errorf(wire.CodeMountFailed, "mount %s: %v", s.dir, err).With("dir", s.dir)
	}
	_ = widenReadahead(s.dir, fo.MaxReadAhead) // best effort: reads work as well, in smaller requests
	s.mu.Lock()
	s.server, s.state = server, StateMounted
	s.mu.Unlock()
	go func() {
		server.Wait()
		// A file created and never flushed (its handle was not released
		// before the mount went) is committed, empty.
		if en := root.fsys.settle(context.Background()); en != 0 {
			s.mu.Lock()
			s.lost = unsettled(s.dir, en)
			s.mu.Unlock()
		}
		if st := root.fsys.stager; st != nil {
			st.stop() // what it staged and nobody committed, the unlock releases
		}
		s.mu.Lock()
		s.state = StateUnmounted
		s.mu.Unlock()
		s.release()
		close(s.done)
	}()
	return nil
}

// refused reports whether err, from go-fuse's mount, says that this
// process may not mount: EPERM or EACCES from mount(2), or fusermount
// failing (go-fuse gives only its exit status; what it said went to its
// stderr). Mount has already checked that dir is a directory and no mount
// point, so fusermount has nothing else to refuse.
func refused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) ||
		strings.HasPrefix(err.Error(), "fusermount exited with code")
}

// release drops the vault lock once.
func (s *Session) release() {
	s.mu.Lock()
	locked := s.locked
	s.locked = false
	s.mu.Unlock()
	if locked {
		_ = s.store.Unlock(context.Background(), vault.LockMount)
	}
}

// Dir is the mount point.
func (s *Session) Dir() string { return s.dir }

// State returns the session's state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Panics counts request handlers that panicked (each answered EIO).
func (s *Session) Panics() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.panics
}

// Err says, once the mount has gone, why files created in it and never
// flushed could not be committed when it went (their creators were told
// so at close, or never closed them): no_space on a full disk,
// quota_exceeded over a quota, internal otherwise. It is nil while the
// mount is up and when every such file was committed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// unsettled is the error of files of the mount at dir left uncommitted
// with errno en when it went.
func unsettled(dir string, en syscall.Errno) error {
	code := wire.CodeInternal
	switch en {
	case syscall.ENOSPC:
		code = wire.CodeNoSpace
	case syscall.EDQUOT:
		code = wire.CodeQuotaExceeded
	}
	return wire.Errorf(code, "mount %s: files created in the mount could not be committed when it went: %w", dir, en).With("dir", dir)
}

// Buffers returns what the mount holds of writes not committed yet, and
// the peaks so far (see BufferStats). Safe at any time, also after the
// mount has gone; it costs one lock.
func (s *Session) Buffers() BufferStats {
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	if root == nil {
		return BufferStats{}
	}
	return root.fsys.buf.stats()
}

// Done is closed when the mount has gone, whoever unmounted it.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait blocks until the mount has gone.
func (s *Session) Wait() { <-s.done }

// Unmount unmounts the session. A busy mount fails with mount_busy naming
// the processes that hold it, unless lazy, which detaches it (it goes
// away when they let go). Unmounting twice is not an error.
func (s *Session) Unmount(lazy bool) error {
	s.mu.Lock()
	switch s.state {
	case StateUnmounted:
		s.mu.Unlock()
		return nil
	case StateUnmounting:
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.state = StateUnmounting
	server := s.server
	s.mu.Unlock()
	err := Unmount(s.dir, lazy)
	if err != nil && !wire.HasCode(err, wire.CodeNotMounted) {
		s.mu.Lock()
		s.state = StateMounted
		s.mu.Unlock()
		return err
	}
	if server != nil {
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			if !lazy {
				return wire.Errorf(wire.CodeMountFailed, "unmount %s: the server did not stop", s.dir)
			}
		}
	}
	return nil
}

// Unmount unmounts the avfs mount at dir from any process. A busy mount
// fails with mount_busy naming the processes that hold it; lazy detaches it.
// It never unmounts anything else: a directory that is not a mount point,
// or whose mount is not an avfs one (see IsAvfsMount), fails with
// not_mounted and is left alone. A dead avfs mount (its server killed) is
// still one and is unmounted.
func Unmount(dir string, lazy bool) error {
	abs, err := mountDir(dir)
	if err != nil {
		return wire.Errorf(wire.CodeInvalidInput, "unmount: %v", err)
	}
	e, found, err := MountAt(abs)
	switch {
	case err != nil:
		return fmt.Errorf("unmount %s: %w", abs, err)
	case !found:
		return wire.Errorf(wire.CodeNotMounted, "unmount: %s is not mounted", abs).With("dir", abs)
	case !e.Avfs():
		return wire.Errorf(wire.CodeNotMounted, "unmount: %s is not an avfs mount (%s from %q); refused", abs, e.FSType, e.Source).
			With("dir", abs).With("fstype", e.FSType).With("source", e.Source)
	}
	return unmount(abs, lazy)
}

// unmount unmounts the mount at abs, which the caller knows is avfs's.
func unmount(abs string, lazy bool) error {
	var err error
	flags := 0
	if lazy {
		flags = syscall.MNT_DETACH
	}
	if os.Geteuid() == 0 {
		err = syscall.Unmount(abs, flags)
	} else {
		args := []string{"-u"}
		if lazy {
			args = append(args, "-z")
		}
		bin := "fusermount3"
		if _, lerr := exec.LookPath(bin); lerr != nil {
			bin = "fusermount"
		}
		if out, cerr := exec.Command(bin, append(args, abs)...).CombinedOutput(); cerr != nil {
			if strings.Contains(string(out), "busy") {
				err = syscall.EBUSY
			} else {
				err = fmt.Errorf("%s: %s", bin, strings.TrimSpace(string(out)))
			}
		}
	}
	if errors.Is(err, syscall.EBUSY) {
		holders := Holders(abs)
		names := make([]string, len(holders))
		for i, h := range holders {
			names[i] = fmt.Sprintf("%s (pid %d)", h.Command, h.PID)
		}
		msg := "processes still use it"
		if len(names) > 0 {
			msg = "in use by " + strings.Join(names, ", ")
		}
		return wire.Errorf(wire.CodeMountBusy, "unmount %s: %s; use --lazy to detach it", abs, msg).With("dir", abs).With("holders", holders)
	}
	if err != nil {
		return wire.Errorf(wire.CodeMountFailed, "unmount %s: %v", abs, err).With("dir", abs)
	}
	return nil
}

// Holder is a process that uses a mount.
type Holder struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	How     string `json:"how"` // cwd, root, exe, fd
}

// Holders lists the processes whose cwd, root, executable or open files
// are under dir.
func Holders(dir string) []Holder {
	procs, _ := os.ReadDir("/proc")
	var out []Holder
	under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := filepath.Join("/proc", p.Name())
		how := ""
		for _, l := range []string{"cwd", "root", "exe"} {
			if t, err := os.Readlink(filepath.Join(base, l)); err == nil && under(t) {
				how = l
				break
			}
		}
		if how == "" {
			fds, _ := os.ReadDir(filepath.Join(base, "fd"))
			for _, fd := range fds {
				if t, err := os.Readlink(filepath.Join(base, "fd", fd.Name())); err == nil && under(t) {
					how = "fd"
					break
				}
			}
		}
		if how == "" {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(base, "comm"))
		out = append(out, Holder{PID: pid, Command: strings.TrimSpace(string(comm)), How: how})
	}
	return out
}

// KillHolders kills (SIGKILL) the processes that use dir, as Holders
// finds them, until none is left or wait has passed.
func KillHolders(dir string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		hs := Holders(dir)
		if len(hs) == 0 || time.Now().After(deadline) {
			return
		}
		for _, h := range hs {
			_ = syscall.Kill(h.PID, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// IsMounted reports whether dir is a mount point (from /proc/self/mountinfo),
// of any file system; dir is compared as given.
func IsMounted(dir string) bool {
	_, found, err := MountAt(dir)
	return err == nil && found
}

// CleanStale detaches a dead avfs mount at dir: one whose server was
// killed, which answers "transport endpoint is not connected". Anything
// else there, a dead FUSE mount of another file system included, is left
// alone (and is not an error).
//
// The server is asked with statfs, which the kernel always sends to it: a
// stat of the mount point could be answered from the attributes a writer
// mount lets the kernel keep for an hour (WriterCacheTime), hiding that
// nobody serves it any more.
func CleanStale(dir string) error {
	var st unix.Statfs_t
	err := unix.Statfs(dir, &st)
	if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		return nil
	}
	if uerr := Unmount(dir, true); uerr != nil && !wire.HasCode(uerr, wire.CodeNotMounted) {
		return fmt.Errorf("clean stale mount: %w", uerr)
	}
	return nil
}

// widenReadahead sets the kernel's readahead window of the mount at dir
// to most bytes (its backing device's read_ahead_kb).
//
// Cost it removes: FUSE takes the smaller of the window the server asks
// for (MaxReadAhead) and its device's default, 128 KiB, so a file read
// sequentially came as 128 KiB requests whatever max_read and max_pages
// allow: 800 requests for 100 MiB, each a round trip through the server,
// and page cache filled in small pieces. The window is the mount's own
// (the device exists while it is mounted), so widening it touches nothing
// else. Writing it needs root; it fails quietly for others (the mount is
// as correct, in smaller reads).
func widenReadahead(dir string, most int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	return os.WriteFile(readaheadKBPath(st.Dev), []byte(strconv.Itoa(most>>10)), 0)
}

// readaheadKBPath is the sysfs file of the readahead window of device dev.
func readaheadKBPath(dev uint64) string {
	return fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev))
}
