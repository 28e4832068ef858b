package vault

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Host file system access relative to directory file descriptors.
//
// Everything Export writes and everything Import and Sync read is reached
// from a directory fd opened once on the path the caller gave (which may
// contain symlinks: a person typed it). What lies beneath that directory
// was written by whatever ran in the vault, so no name beneath it is ever
// resolved through a symlink: paths are opened with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or, where the kernel has no
// openat2 (ENOSYS), by a walk of openat calls with O_NOFOLLOW, one
// component at a time. Changes are made with *at calls on the parent's fd
// or on the fd of the opened entry itself.

// noOpenat2 is set once openat2 turned out to be missing (ENOSYS); tests
// set it to exercise the openat walk.
var noOpenat2 atomic.Bool

// openBeneath opens rel (slash-separated, relative to the directory fd
// root; "" is root itself) with flags, following no symlink in any of its
// components and never leaving root. A symlink on the way fails with
// ELOOP (ENOTDIR for one in a directory's place with the openat walk).
func openBeneath(root int, rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags),
			Mode:    uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return openWalk(root, rel, flags, mode)
}

// openWalk is openBeneath without openat2: one openat with O_NOFOLLOW per
// component, refusing "..", "." and empty components.
func openWalk(root int, rel string, flags int, mode uint32) (int, error) {
	if rel == "." {
		return unix.Openat(root, ".", flags, mode)
	}
	parts := strings.Split(rel, "/")
	dir := root
	for i, p := range parts {
		if p == "" || p == "." || p == ".." {
			if dir != root {
				unix.Close(dir)
			}
			return -1, unix.EXDEV
		}
		fl := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			fl = flags
		}
		fd, err := unix.Openat(dir, p, fl, mode)
		if dir != root {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	return dir, nil
}

// lstatAt is fstatat(dirfd, name) without following a final symlink.
func lstatAt(dirfd int, name string) (hostInfo, error) {
	h := hostInfo{name: name}
	err := unix.Fstatat(dirfd, name, &h.st, unix.AT_SYMLINK_NOFOLLOW)
	return h, err
}

// fstatInfo is fstat(fd) as a hostInfo.
func fstatInfo(fd int, name string) (hostInfo, error) {
	h := hostInfo{name: name}
	err := unix.Fstat(fd, &h.st)
	return h, err
}

// readlinkAt reads the symlink name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// readNames lists the directory open at fd, sorted. It reads through a
// duplicate of fd, which stays open.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// removeAt removes the entry name in dirfd without following it: a
// symlink is removed itself, a directory with everything in it.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	names, err := readNames(fd)
	for _, n := range names {
		if err != nil {
			break
		}
		err = removeAt(fd, n)
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// chmodAt sets the mode of name in dirfd, which must not be a symlink:
// with fchmodat2 AT_SYMLINK_NOFOLLOW where the kernel has it, else
// through an O_PATH fd of the entry checked not to be a symlink.
func chmodAt(dirfd int, name string, mode uint32) error {
	err := unix.Fchmodat(dirfd, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	// The magic link names the inode the fd holds, not a path to resolve.
	return unix.Chmod("/proc/self/fd/"+itoa(fd), mode)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

// timespecs is what utimensat takes for atime and mtime; a zero time is
// left as it is (UTIME_OMIT), as os.Chtimes does.
func timespecs(atime, mtime time.Time) [2]unix.Timespec {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	if !atime.IsZero() {
		ts[0] = unix.NsecToTimespec(atime.UnixNano())
	}
	if !mtime.IsZero() {
		ts[1] = unix.NsecToTimespec(mtime.UnixNano())
	}
	return ts
}

// futimes sets the times of the file open at fd (utimensat with a NULL
// path, as futimens does).
func futimes(fd int, atime, mtime time.Time) error {
	ts := timespecs(atime, mtime)
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// lutimesAt sets the times of name in dirfd, of a symlink itself.
func lutimesAt(dirfd int, name string, atime, mtime time.Time) error {
	ts := timespecs(atime, mtime)
	return unix.UtimesNanoAt(dirfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW)
}

// hostInfo is an lstat or fstat of a host entry as an fs.FileInfo; Sys
// is its *unix.Stat_t.
type hostInfo struct {
	name string
	st   unix.Stat_t
}

func (h hostInfo) Name() string       { return h.name }
func (h hostInfo) Size() int64        { return h.st.Size }
func (h hostInfo) ModTime() time.Time { return time.Unix(h.st.Mtim.Unix()) }
func (h hostInfo) IsDir() bool        { return h.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (h hostInfo) Sys() any           { return &h.st }
func (h hostInfo) Mode() fs.FileMode {
	m := fs.FileMode(h.st.Mode & 0o777)
	switch h.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFREG:
	default:
		m |= fs.ModeIrregular
	}
	if h.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if h.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if h.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// statTimes is what a host FileInfo tells beyond fs.FileInfo: its
// identity, link count, atime and ctime (ok false when it has none).
func statTimes(fi fs.FileInfo) (id devIno, nlink uint64, atime, ctime time.Time, ok bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return devIno{st.Dev, st.Ino}, uint64(st.Nlink), time.Unix(st.Atim.Unix()), time.Unix(st.Ctim.Unix()), true
	case *syscall.Stat_t:
		return devIno{uint64(st.Dev), st.Ino}, uint64(st.Nlink), time.Unix(st.Atim.Unix()), time.Unix(st.Ctim.Unix()), true
	}
	return devIno{}, 0, time.Time{}, time.Time{}, false
}

// sameEntry reports whether a and b (an lstat and the fstat of what was
// opened under its name) are one host file.
func sameEntry(a, b hostInfo) bool {
	return a.st.Dev == b.st.Dev && a.st.Ino == b.st.Ino && a.st.Mode&unix.S_IFMT == b.st.Mode&unix.S_IFMT
}
