package runner

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/sandbox"
	"avfs/wire"
)

// Run directories
//
// Everything of one run that is not in the vault — its lock, its record
// (mountpointFile), its mount point or materialised copy, the files a FUSE
// mount spills — lives in a run directory <root>/exec-<pid>-<random>, made
// 0700 under a root that only avfs's user can enter (RunDir). Whoever
// cleans up after a killed avfs (the next run, the run's guard) reads
// records only from there, so nobody else can tell it what to unmount,
// kill or remove: a shared /tmp held run directories anyone could plant
// (an avfs-exec-<dead pid>-x whose record named /, say).
//
// A run is alive while its avfs holds an exclusive flock on the run
// directory's lock file (the descriptor is close-on-exec: the command never
// holds it). The kernel drops the lock when that avfs dies, however it dies
// and whatever pid namespace it ran in; a pid proved nothing (one from
// another namespace looks dead, a dead one may be reused). A directory is
// cleaned only by whoever then takes the lock, so two cleaners never clean
// one run and nobody cleans a live one.
//
// The records are protected from other users, not from the run's own
// command: it runs as avfs's user and, unless a sandbox confines it, can
// reach the run directory (and anything else avfs can reach). Cleanup
// therefore proves what it acts on (see cleanRun) rather than trusting the
// record.
//
// Directories of earlier versions ($TMPDIR/avfs-exec-*) are not looked at:
// anyone could have made them. An upgrade leaves those of killed runs
// behind (they hold no mount that was not already dead); they can be
// removed by hand.

// runPrefix begins the name of every run directory under a RunDir.
const runPrefix = "exec-"

// lockFile is the run directory's lock: flocked exclusively by the live
// run's avfs, then by whoever cleans up after it.
const lockFile = "lock"

// RunDir is the root of the run directories of avfs's user: a real
// directory (not a symlink) owned by the effective uid, mode 0700.
type RunDir struct {
	path string
}

// OpenRunDir opens the run root at path, making it (and its missing
// parents, 0700) when there is none. path must be absolute.
//
// It fails with host_io when path cannot be made or read, is a symlink or
// not a directory, or is owned by another user: then nothing under it is
// trusted and no run starts. A root of ours that group or others may
// enter is given mode 0700 back (whatever they left in it is checked entry
// by entry: run directories of another owner are ignored). It never
// follows a symlink at path itself; symlinks among its parents ($AVFS_HOME
// on another disk) are followed, since whoever can change those owns the
// vaults too.
func OpenRunDir(path string) (*RunDir, error) {
	return openRunDir(path, true)
}

// openRunDir is OpenRunDir; without create, a missing root is not made,
// and one that group or others may enter is refused rather than fixed
// (the guard checks a root it did not choose).
func openRunDir(path string, create bool) (*RunDir, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return nil, wire.Errorf(wire.CodeHostIO, "run directory %q: not an absolute, clean path", path).With("path", path)
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, wire.Errorf(wire.CodeHostIO, "run directory: %v", err).With("path", path)
		}
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, wire.Errorf(wire.CodeHostIO, "run directory: %v", err).With("path", path)
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, wire.Errorf(wire.CodeHostIO, "run directory %s is not a directory (a symlink?): refusing to use it", path).With("path", path)
		}
		return nil, wire.Errorf(wire.CodeHostIO, "run directory %s: %v", path, err).With("path", path)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "run directory %s: %v", path, err).With("path", path)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return nil, wire.Errorf(wire.CodeHostIO, "run directory %s is owned by uid %d, not by avfs's uid %d: refusing to use it", path, st.Uid, euid).
			With("path", path).With("owner", st.Uid)
	}
	if st.Mode&0o7077 != 0 {
		if !create {
			return nil, wire.Errorf(wire.CodeHostIO, "run directory %s: mode %04o, not 0700", path, st.Mode&0o7777).With("path", path)
		}
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return nil, wire.Errorf(wire.CodeHostIO, "run directory %s: mode %04o, and it cannot be made 0700: %v", path, st.Mode&0o7777, err).With("path", path)
		}
	}
	return &RunDir{path: path}, nil
}

// Path is the root's path.
func (d *RunDir) Path() string { return d.path }

// ExecDir is the directory of one live run, locked by this process until
// Remove.
type ExecDir struct {
	Dir  string
	lock *os.File
}

// NewRun makes a run directory, mode 0700, and takes its lock.
//
// A cleaner that finds the directory between its making and its locking
// takes it for a dead run's and removes it; NewRun notices (the lock is
// taken, or the lock file it holds is no longer the directory's) and tries
// another name. It fails with host_io.
func (d *RunDir) NewRun() (*ExecDir, error) {
	var last error
	for range 5 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		dir := filepath.Join(d.path, fmt.Sprintf("%s%d-%s", runPrefix, os.Getpid(), hex.EncodeToString(b[:])))
		if err := os.Mkdir(dir, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return nil, wire.Errorf(wire.CodeHostIO, "proxy exec: make the run directory: %v", err).With("path", dir)
		}
		if err := os.Chmod(dir, 0o700); err != nil { // Mkdir's mode is under the umask
			os.Remove(dir)
			return nil, wire.Errorf(wire.CodeHostIO, "proxy exec: make the run directory: %v", err).With("path", dir)
		}
		lock, err := lockRun(dir, 0)
		if err == nil {
			return &ExecDir{Dir: dir, lock: lock}, nil
		}
		last = err
		if !errors.Is(err, errRunLocked) && !errors.Is(err, errRunGone) {
			os.RemoveAll(dir)
			break
		}
	}
	return nil, wire.Errorf(wire.CodeHostIO, "proxy exec: make the run directory in %s: %v", d.path, last).With("path", d.path)
}

// Remove removes the run directory, then lets go of its lock (in that
// order: no cleaner may take a directory that is being removed). It is
// safe to call more than once.
//
// The directory must hold no mount: removal would descend into it. Remove
// refuses (host_io) when one is found under it, and keeps the lock.
func (r *ExecDir) Remove() error {
	if r == nil || r.lock == nil {
		return nil
	}
	if m, err := mountsUnder(r.Dir); err == nil && len(m) > 0 {
		return wire.Errorf(wire.CodeHostIO, "proxy exec: %s is still mounted: the run directory is left", m[0]).With("path", r.Dir)
	}
	err := os.RemoveAll(r.Dir)
	r.lock.Close()
	r.lock = nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wire.Errorf(wire.CodeHostIO, "proxy exec: remove %s: %v", r.Dir, err).With("path", r.Dir)
	}
	return nil
}

// writeRecord writes the run's record (mountpointFile), which cleanRun
// reads after a killed avfs.
func (r *ExecDir) writeRecord(rec mountpointRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return wire.Errorf(wire.CodeInternal, "proxy exec: record the run: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(r.Dir, mountpointFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "proxy exec: record the run: %v", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "proxy exec: record the run: %v", err)
	}
	return nil
}

// CleanStale cleans up after the runs under d whose avfs is gone (see
// cleanRun): each entry that is a real directory named exec-*, owned by
// avfs's user, whose lock it can take at once. Live runs (their lock is
// held, by a process in any pid namespace) and entries it cannot prove are
// run directories are left alone. It reports nothing: what it cannot clean
// stays for the next try.
func (d *RunDir) CleanStale() {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), runPrefix) {
			continue
		}
		dir := filepath.Join(d.path, e.Name())
		if !isRunDir(dir) {
			continue
		}
		lock, err := lockRun(dir, 0)
		if err != nil {
			continue
		}
		cleanRun(dir)
		lock.Close()
	}
}

// isRunDir reports whether dir is a real directory (not a symlink) owned
// by avfs's user.
func isRunDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Geteuid())
}

var (
	errRunLocked = errors.New("the run is alive (its lock is held)")
	errRunGone   = errors.New("the run directory was removed meanwhile")
)

// lockRun takes the lock of the run directory dir, waiting up to wait for
// it (0: one try). It fails with errRunLocked while another open file
// holds it (a live run, or another cleaner), and with errRunGone when the
// directory, or its lock file, was removed or replaced meanwhile (a
// cleaner that held the lock removed it: the file locked is no longer the
// directory's).
//
// A missing lock file is made: a run killed between making its directory
// and its lock file is dead, and the live run that NewRun is making then
// fails to lock (or finds its lock file replaced) and tries another name.
// The lock file is opened without following a symlink and must be a
// regular file owned by avfs's user.
func lockRun(dir string, wait time.Duration) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errRunGone
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		f.Close()
		return nil, fmt.Errorf("%s is not a lock file of avfs's", path)
	}
	deadline := time.Now().Add(wait)
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errRunLocked
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
	var now unix.Stat_t
	if err := unix.Lstat(path, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		f.Close()
		return nil, errRunGone
	}
	return f, nil
}

// runRoot is the run root of r: RunDir, or else <TempDir>/avfs-run-<euid>
// (the same checks make another user's directory of that name refuse
// runs, never mislead them). $XDG_RUNTIME_DIR is not used: it is a small
// tmpfs, and materialised copies of vaults live in run directories.
func (r *Runner) runRoot() (*RunDir, error) {
	path := r.RunDir
	if path == "" {
		path = filepath.Join(r.tempDir(), fmt.Sprintf("avfs-run-%d", os.Geteuid()))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "run directory: %v", err)
	}
	return OpenRunDir(abs)
}

// NewSandboxPool returns a pool that prepares r's sandboxes ahead (see
// sandbox.Pool), in the directory "sandboxes" of r's run root; the caller
// closes it. It is for a process that outlives its runs (avfs serve): a
// one-shot run would only pay for a sandbox nobody takes.
func (r *Runner) NewSandboxPool() (*sandbox.Pool, error) {
	d, err := r.runRoot()
	if err != nil {
		return nil, err
	}
	return sandbox.NewPool(r.exe(), filepath.Join(d.path, "sandboxes"), 0), nil
}

// newRun makes the directory of a run that starts now.
func (r *Runner) newRun() (*ExecDir, error) {
	d, err := r.runRoot()
	if err != nil {
		return nil, fmt.Errorf("proxy exec: %w", err)
	}
	return d.NewRun()
}

// dirID is the identity of a directory avfs made or used at --mountpoint:
// what cleanup compares before it removes or empties anything there. The
// path alone proves nothing (the directory may have been replaced since,
// by a symlink or by someone else's), a device and inode number with the
// owner do: another user cannot make a directory that avfs's user owns.
type dirID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	UID uint32 `json:"uid"`
}

// idOf is the identity of the directory fi describes.
func idOf(fi fs.FileInfo) *dirID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &dirID{Dev: uint64(st.Dev), Ino: st.Ino, UID: st.Uid}
}

func (id *dirID) is(fi fs.FileInfo) bool {
	got := idOf(fi)
	return id != nil && got != nil && fi.IsDir() && *got == *id
}

// at reports whether the directory at path (followed, as --mountpoint
// is) is the one id identifies.
func (id *dirID) at(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && id.is(fi)
}

// safeTarget reports whether dir may be acted on at all: absolute, clean,
// and not /.
func safeTarget(dir string) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir && dir != "/"
}

// errNotProven is what the --mountpoint helpers return for a directory
// they cannot prove is the one avfs made or used.
var errNotProven = errors.New("not the directory avfs made or used (it was replaced)")

// removeAt removes what a run left in the --mountpoint directory dir whose
// identity is id: with whole, the directory too (avfs made it); with
// onlyEmpty, the directory only if it is empty (a mount point avfs made:
// whatever is in it now is not avfs's); otherwise its contents, then it
// gets mode kept back (an empty directory a copy was made in).
//
// It acts only on that very directory: it is opened (os.Root), checked
// against id, and everything under it is removed through that descriptor,
// never following a symlink out of it. A directory avfs made is looked up
// in its parent without following a symlink (one there now is not avfs's)
// and removed through the parent's descriptor after the same check; the
// directory a copy was made in may be a symlink, as --mountpoint was
// given. Nothing mounted under dir is crossed: a mount there makes it
// fail. It never acts on / or on a path that is not absolute and clean.
// Errors: errNotProven, or the file system's.
func removeAt(dir string, id *dirID, whole, onlyEmpty bool, kept fs.FileMode) error {
	if !safeTarget(dir) || id == nil {
		return errNotProven
	}
	if m, err := mountsUnder(dir); err != nil {
		return err
	} else if len(m) > 0 {
		return fmt.Errorf("%s is mounted", m[0])
	}
	var parent *os.Root
	name := filepath.Base(dir)
	if whole {
		p, err := os.OpenRoot(filepath.Dir(dir))
		if err != nil {
			return err
		}
		defer p.Close()
		fi, err := p.Lstat(name)
		if err != nil {
			return err
		}
		if !id.is(fi) {
			return errNotProven
		}
		parent = p
	}
	if !onlyEmpty {
		var root *os.Root
		var err error
		if parent != nil {
			root, err = parent.OpenRoot(name)
		} else {
			root, err = os.OpenRoot(dir)
		}
		if err != nil {
			return err
		}
		err = emptyDir(root, id, whole, kept)
		root.Close()
		if err != nil || !whole {
			return err
		}
	}
	fi, err := parent.Lstat(name)
	if err != nil {
		return err
	}
	if !id.is(fi) {
		return errNotProven
	}
	return parent.Remove(name) // rmdir: fails if something is in it
}

// emptyDir removes everything in root, the directory id identifies; unless
// whole (it goes next), it then gets mode kept.
func emptyDir(root *os.Root, id *dirID, whole bool, kept fs.FileMode) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !id.is(fi) {
		return errNotProven
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := root.RemoveAll(n); err != nil {
			return err
		}
	}
	if whole {
		return nil
	}
	return f.Chmod(kept.Perm() | kept&(fs.ModeSetgid|fs.ModeSticky|fs.ModeSetuid))
}
