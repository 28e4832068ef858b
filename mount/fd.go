package mount

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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
		if t, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && t == "/dev/fuse" {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
