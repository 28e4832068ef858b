// Package fullfs gives tests a small file system of their own to fill: a
// tmpfs mounted in a directory of the test's t.TempDir(). Mounting needs
// root, as the FUSE and sandbox tests do.
package fullfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes at a new directory and returns the
// directory; it is unmounted (detached) when the test ends, before the
// directory is removed. Without root the test is skipped, unless CI is
// "true", where it fails.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mounting a tmpfs needs root, which CI has")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// Fill fills the file system of dir to the last byte with a file of zeros
// made in dir, and returns its path: removing it frees the space again.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	p, err := TryFill(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryFill is Fill for a goroutine other than the test's.
func TryFill(dir string) (string, error) {
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, block := range []int{1 << 20, 4096, 1} {
		buf := make([]byte, block)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return "", fmt.Errorf("fill %s: %w", dir, err)
				}
				break
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "", err
	}
	if st.Bavail != 0 {
		return "", fmt.Errorf("fill %s: %d blocks still free", dir, st.Bavail)
	}
	return p, nil
}

// Free returns the bytes of dir's file system that an unprivileged
// process may still use.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
