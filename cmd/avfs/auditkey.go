package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// auditKeySize is the length of the audit key: 32 random bytes.
const auditKeySize = 32

// auditKeyPath is the installation's audit key: $AVFS_HOME/keys/audit.key.
// Every audit row avfs writes carries an HMAC-SHA256 under it, so that
// someone holding a vault file but not this key cannot rewrite the log
// unnoticed (docs/vault.md, "Audit log"). It lives outside the vaults: a
// vault copied elsewhere does not carry it.
func auditKeyPath(home string) string { return filepath.Join(home, "keys", "audit.key") }

// loadAuditKey returns the installation's audit key. create makes it on
// first use (the directory 0700, the file 0600, linked into place so that
// of two first users exactly one key wins); without create a missing key
// is nil, nil (audit verify on a machine that never wrote a vault).
//
// The key is trusted only if the directory and the file are owned by
// avfs's user, neither is a symbolic link, the directory is not group or
// world writable, the file gives no access to group or others (reading it
// lets one forge MACs) and it holds exactly 32 bytes; otherwise
// audit_key_invalid, and avfs does not fall back to writing rows without
// a MAC.
func loadAuditKey(home string, create bool) ([]byte, error) {
	dir, path := filepath.Dir(auditKeyPath(home)), auditKeyPath(home)
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, wire.Errorf(wire.CodeHostIO, "audit key: %v", err).With("path", dir)
		}
	}
	if err := checkKeyDir(dir); err != nil {
		if !create && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	key, err := readAuditKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if !create {
		return nil, nil
	}
	if err := makeAuditKey(dir, path); err != nil {
		return nil, err
	}
	return readAuditKey(path)
}

func auditKeyError(path, format string, args ...any) *wire.Error {
	return wire.Errorf(wire.CodeAuditKey, "audit key %s: %s", path, fmt.Sprintf(format, args...)).With("path", path)
}

// checkKeyDir checks the keys directory (an error wrapping
// fs.ErrNotExist when it is missing).
func checkKeyDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return wire.Errorf(wire.CodeHostIO, "audit key: %w", err).With("path", dir)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return auditKeyError(dir, "the directory is a symbolic link: refusing to use it")
	case !fi.IsDir():
		return auditKeyError(dir, "not a directory")
	case st == nil || st.Uid != uint32(os.Geteuid()):
		return auditKeyError(dir, "the directory is not owned by avfs's user (uid %d)", os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return auditKeyError(dir, "the directory is group or world writable (mode %04o; want 0700)", fi.Mode().Perm())
	}
	return nil
}

// readAuditKey reads and checks the key file (an error wrapping
// fs.ErrNotExist when it is missing).
func readAuditKey(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil, fs.ErrNotExist
		case errors.Is(err, unix.ELOOP):
			return nil, auditKeyError(path, "a symbolic link: refusing to use it")
		}
		return nil, wire.Errorf(wire.CodeHostIO, "audit key %s: %w", path, err).With("path", path)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "audit key %s: %w", path, err).With("path", path)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, auditKeyError(path, "not a regular file")
	case st.Uid != uint32(os.Geteuid()):
		return nil, auditKeyError(path, "owned by uid %d, not by avfs's user (uid %d)", st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return nil, auditKeyError(path, "mode %04o gives access to group or others (want 0600)", st.Mode&0o7777)
	case st.Size != auditKeySize:
		return nil, auditKeyError(path, "%d bytes, not %d", st.Size, auditKeySize)
	}
	key := make([]byte, auditKeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "audit key %s: %w", path, err).With("path", path)
	}
	return key, nil
}

// makeAuditKey writes 32 random bytes to a file of its own in dir and
// links it to path; a key made meanwhile by another process wins.
func makeAuditKey(dir, path string) error {
	key := make([]byte, auditKeySize)
	if _, err := rand.Read(key); err != nil {
		return wire.Errorf(wire.CodeInternal, "audit key: %w", err)
	}
	f, err := os.CreateTemp(dir, ".audit.key-*")
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "audit key: %w", err).With("path", dir)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "audit key: %w", err).With("path", path)
	}
	return nil
}

// auditKey is the installation's audit key, loaded once per command;
// create as in loadAuditKey.
func (e *env) auditKey(create bool) ([]byte, error) {
	if e.akey != nil {
		return e.akey, nil
	}
	key, err := loadAuditKey(e.home, create)
	if err != nil {
		return nil, err
	}
	e.akey = key
	return key, nil
}
