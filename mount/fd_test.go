package mount

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"avfs/vault"
)

// A mount's FUSE connection is never inherited by programs the serving
// process starts.
func TestFUSEFdCloseOnExec(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	v, err := vault.Create(ctx, filepath.Join(t.TempDir(), "v.avfs"), "v", vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	dir := t.TempDir()
	sess, err := Mount(ctx, v, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Unmount(true)
	n := 0
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); target != "/dev/fuse" {
			continue
		}
		n++
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd %d on /dev/fuse: flags %#x, %v: inherited by children", fd, flags, err)
		}
	}
	if n == 0 {
		t.Fatal("no /dev/fuse descriptor found while mounted")
	}
	if err := sess.Unmount(false); err != nil {
		t.Fatal(err)
	}
}
