package mount

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"avfs/wire"
)

// errno maps a vault error to the errno a process sees. A damaged vault
// (integrity_failed: a chunk whose data does not match its hash, a missing
// one) is EIO, as a disk's unreadable sector is: the reader never gets the
// bad bytes.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	switch wire.CodeOf(err) {
	case wire.CodeNotFound, wire.CodeVersionNotFound:
		return syscall.ENOENT
	case wire.CodeAlreadyExists:
		return syscall.EEXIST
	case wire.CodeNotDir:
		return syscall.ENOTDIR
	case wire.CodeIsDir:
		return syscall.EISDIR
	case wire.CodeNotEmpty:
		return syscall.ENOTEMPTY
	case wire.CodeQuotaExceeded:
		return syscall.EDQUOT
	case wire.CodeNoSpace:
		return syscall.ENOSPC
	case wire.CodeVaultBusy:
		return syscall.EBUSY
	case wire.CodeInvalidPath:
		if strings.Contains(err.Error(), "too long") {
			return syscall.ENAMETOOLONG
		}
		return syscall.EINVAL
	case wire.CodeInvalidInput:
		return syscall.EINVAL
	case wire.CodeIntegrity:
		return syscall.EIO
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	return syscall.EIO
}
