package mount

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeFUSEOnExec marks every /dev/fuse descriptor of this process
// close-on-exec. go-fuse's direct mount (used as root) leaves the one it
// opens inheritable: every program the serving process starts would then
// hold the FUSE connection, could read and answer its requests, and would
// keep the mount alive (and hanging) after the server died. It must run
// before the process starts anything once a mount is made.
func closeFUSEOnExec() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Nearly every descriptor is close-on-exec already (Go opens them
		// so): only the others are looked at.
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == fuseDev {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// fuseDev is the device number of /dev/fuse (character device 10, 229).
var fuseDev = unix.Mkdev(10, 229)
