package server

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// Listener is where a server answers, with what it holds for it.
type Listener struct {
	net.Listener
	lock *os.File // the socket's lock file, held while serving
}

// Close closes the listener (a Unix socket is removed) and lets go of its
// lock.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Listen opens addr: "unix:PATH" (or a bare PATH) or "tcp:HOST:PORT".
//
// A Unix socket is made mode 0600 in a directory that must be a real
// directory owned by avfs's user that nobody else may write (else
// invalid_input: another user could plant or replace the socket). The
// socket is held with a lock file beside it (PATH.lock, flocked): a live
// daemon's socket is refused (invalid_input naming it), a
// socket left by a killed daemon is replaced. A tcp address must come with
// a token (the caller's check).
func Listen(addr string) (*Listener, error) {
	if a, ok := strings.CutPrefix(addr, "tcp:"); ok {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return nil, wire.Errorf(wire.CodeHostIO, "serve: listen on %s: %v", a, err)
		}
		return &Listener{Listener: ln}, nil
	}
	path := strings.TrimPrefix(addr, "unix:")
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInvalidInput, "serve: socket %q: %v", path, err)
	}
	if err := privateDir(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(abs+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "serve: lock %s: %v", abs, err).With("path", abs)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, wire.Errorf(wire.CodeInvalidInput, "serve: another avfs serve is running on %s", abs).With("path", abs)
		}
		return nil, wire.Errorf(wire.CodeHostIO, "serve: lock %s: %v", abs, err).With("path", abs)
	}
	fail := func(err error) (*Listener, error) { lock.Close(); return nil, err }
	if fi, err := os.Lstat(abs); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return fail(wire.Errorf(wire.CodeInvalidInput, "serve: %s exists and is not a socket", abs).With("path", abs))
		}
		// Ours (the directory is), and no daemon holds its lock: one that
		// answers is a daemon of another kind; else it was left by a killed one.
		if c, err := net.DialTimeout("unix", abs, 200*time.Millisecond); err == nil {
			c.Close()
			return fail(wire.Errorf(wire.CodeInvalidInput, "serve: something answers on %s", abs).With("path", abs))
		}
		if err := os.Remove(abs); err != nil {
			return fail(wire.Errorf(wire.CodeHostIO, "serve: remove the stale socket %s: %v", abs, err).With("path", abs))
		}
	}
	ln, err := net.Listen("unix", abs)
	if err != nil {
		return fail(wire.Errorf(wire.CodeHostIO, "serve: listen on %s: %v", abs, err).With("path", abs))
	}
	if err := os.Chmod(abs, 0o600); err != nil {
		ln.Close()
		return fail(wire.Errorf(wire.CodeHostIO, "serve: %s: %v", abs, err).With("path", abs))
	}
	return &Listener{Listener: ln, lock: lock}, nil
}

// privateDir checks that dir is a real directory owned by avfs's user (or
// root) that neither group nor others may write.
func privateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return wire.Errorf(wire.CodeHostIO, "serve: socket directory %s: %v", dir, err).With("path", dir)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return wire.Errorf(wire.CodeInvalidInput, "serve: socket directory %s is not a directory (a symlink?)", dir).With("path", dir)
	case st.Uid != uint32(os.Geteuid()) && st.Uid != 0:
		return wire.Errorf(wire.CodeInvalidInput, "serve: socket directory %s is owned by uid %d, not by avfs's user", dir, st.Uid).With("path", dir)
	case st.Mode&0o022 != 0:
		return wire.Errorf(wire.CodeInvalidInput, "serve: socket directory %s may be written by others (mode %04o): choose a private one", dir, st.Mode&0o7777).With("path", dir)
	}
	return nil
}
