package mount

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"avfs/vault"
)

// A mount by root widens the kernel's readahead window of its device to
// MaxReadAhead (1 MiB), so sequential reads reach the server in 1 MiB
// requests, not the default 128 KiB.
func TestMountReadaheadWindow(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("the readahead window is widened by root only") // requireFUSE fails under CI, which runs as root
	}
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
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(readaheadKBPath(st.Dev))
	if err != nil || strings.TrimSpace(string(got)) != "1024" {
		t.Fatalf("read_ahead_kb: %q, %v; want 1024", got, err)
	}
}
