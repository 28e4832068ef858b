package vault

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func utimensat(p string, ts []syscall.Timespec) error {
	uts := []unix.Timespec{unix.NsecToTimespec(syscall.TimespecToNsec(ts[0])), unix.NsecToTimespec(syscall.TimespecToNsec(ts[1]))}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, uts, unix.AT_SYMLINK_NOFOLLOW)
}
