package vault

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// forkTmpName is the name of the temporary file of the fork uuid called name.
func forkTmpName(name, uuid string) string { return "." + name + "." + uuid + ".tmp" }

// createForkTmp creates the temporary file of a new fork called name in
// dir, with a fresh uuid, and returns it flocked exclusively: the lock
// proves the fork alive to recoverForks until it is closed, so the caller
// keeps it open until the fork is linked into place or its pin released,
// and the file removed. A recovery may take the lock of a file created but
// not locked yet and remove it; a new uuid is then tried.
func createForkTmp(dir, name string) (uuid, tmp string, lock *os.File, err error) {
	for range 3 {
		uuid = newUUID()
		tmp = filepath.Join(dir, forkTmpName(name, uuid))
		// Vault files are private, like the ones Create makes.
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return "", "", nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // a recovery holds it and removes it
			}
			return "", "", nil, err
		}
		if sameFile(f, tmp) {
			return uuid, tmp, f, nil
		}
		f.Close() // a recovery removed it before it was locked
	}
	return "", "", nil, fmt.Errorf("create a temporary file for fork %q: removed by a concurrent recovery three times", name)
}

// sameFile reports whether path (not followed if a symlink) is the file f.
func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}
