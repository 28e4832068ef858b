package vault

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeSyscalls is how many write system calls the process has made.
func writeSyscalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var n int64
		if _, err := fmt.Sscanf(line, "syscw: %d", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no syscw in /proc/self/io:\n%s", b)
	return 0
}

// A small write transaction changes several pages; SQLite writes each
// log frame as two writes. The avfs-wal VFS gathers them into one.
func TestWALFramesWrittenAtOnce(t *testing.T) {
	_, v := newVault(t)
	write(t, v, "/warm", "x") // the log exists and its header is written
	const n = 100
	before := writeSyscalls(t)
	for i := 0; i < n; i++ {
		write(t, v, fmt.Sprintf("/f%d", i), "content")
	}
	per := float64(writeSyscalls(t)-before) / n
	t.Logf("%.1f write system calls per transaction", per)
	if per > 3 {
		t.Errorf("%.1f write system calls per small transaction, want at most 3", per)
	}
	mustCheck(t, v)
}

// childFileSizeLimit writes to a vault under a file size limit that the
// write-ahead log reaches, and exits 0 when the write failed and left the
// vault as it was.
func childFileSizeLimit() {
	ctx := context.Background()
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit then fails with EFBIG
	v, err := Open(ctx, os.Getenv("AVFS_VAULT_PATH"), Options{Actor: "child"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	defer v.Close()
	if _, err := v.WriteFile(ctx, "/small", strings.NewReader("kept"), WriteOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "small write:", err)
		os.Exit(4)
	}
	fi, err := os.Stat(v.Path() + "-wal")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
	}
	lim := uint64(fi.Size() + 64<<10)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(6)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 512<<10/16)
	if _, err := v.WriteFile(ctx, "/big", bytes.NewReader(big), WriteOptions{}); err == nil {
		fmt.Fprintln(os.Stderr, "a write past the file size limit succeeded")
		os.Exit(7)
	} else {
		fmt.Fprintln(os.Stderr, "big write failed as expected:", err)
	}
	var b bytes.Buffer
	if _, err := v.ReadFile(ctx, "/small", &b); err != nil || b.String() != "kept" {
		fmt.Fprintln(os.Stderr, "after the failed write, /small:", b.String(), err)
		os.Exit(8)
	}
	os.Exit(0)
}

// A commit whose log frames cannot be written fails, and the vault keeps
// its previous state: gathering frames must not turn a failed write into
// a commit that lost them.
func TestWALWriteFailureFailsCommit(t *testing.T) {
	s, v := newVault(t)
	path := v.Path()
	v.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "AVFS_VAULT_CHILD=fsize", "AVFS_VAULT_PATH="+path)
	out, err := cmd.CombinedOutput()
	t.Logf("child: %s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	v2, err := s.Open(context.Background(), strings.TrimSuffix(filepath.Base(path), fileExt))
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if got := read(t, v2, "/small"); got != "kept" {
		t.Errorf("/small = %q, want kept", got)
	}
	if _, err := v2.Stat(context.Background(), "/big"); err == nil {
		t.Error("/big exists after its write failed")
	}
	mustCheck(t, v2)
	if rep, err := v2.VerifyAudit(context.Background()); err != nil || !rep.OK {
		t.Errorf("audit verify: %+v, %v", rep, err)
	}
}
