package mount

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"avfs/vault"
)

// Named pipes and Unix sockets work in a mount as on a local disk: the
// kernel carries the data, the vault keeps the nodes.
func TestFifosAndSockets(t *testing.T) {
	s := serve(t, false)
	pipe := s.path("pipe")
	if err := unix.Mkfifo(pipe, 0o640); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	go func() {
		w, err := os.OpenFile(pipe, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.Write([]byte("through the pipe"))
		w.Close()
	}()
	r, err := os.Open(pipe)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(got) != "through the pipe" {
		t.Fatalf("read the fifo: %q %v", got, err)
	}

	l, err := net.Listen("unix", s.path("app.sock"))
	if err != nil {
		t.Fatalf("bind a Unix socket in the mount: %v", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 4)
		io.ReadFull(c, b)
		c.Write([]byte(string(b) + "-pong"))
		c.Close()
	}()
	c, err := net.Dial("unix", s.path("app.sock"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	c.Write([]byte("ping"))
	got, _ = io.ReadAll(c)
	c.Close()
	l.Close()
	if string(got) != "ping-pong" {
		t.Fatalf("socket answered %q", got)
	}

	for name, typ := range map[string]uint32{"pipe": syscall.S_IFIFO, "app.sock": syscall.S_IFSOCK} {
		var st syscall.Stat_t
		if err := syscall.Lstat(s.path(name), &st); err != nil || st.Mode&syscall.S_IFMT != typ || st.Size != 0 {
			t.Errorf("stat %s: mode %o size %d %v", name, st.Mode, st.Size, err)
		}
	}
	if err := os.Rename(pipe, s.path("pipe2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.path("pipe2"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A device node is kept, but the mount is nodev: it opens nothing
	// (see TestConformanceDeviceNodes).
	if err := unix.Mknod(s.path("dev"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod c: %v", err)
	}
	if f, err := os.Open(s.path("dev")); err == nil {
		f.Close()
		t.Error("opened a device node on a nodev mount")
	}
	s.stop()
	ctx := context.Background()
	if e, err := s.v.Stat(ctx, "/pipe2"); err != nil || e.Kind != vault.KindFifo || e.Mode != 0o600 {
		t.Errorf("vault /pipe2: %+v %v", e, err)
	}
	if e, err := s.v.Stat(ctx, "/app.sock"); err != nil || e.Kind != vault.KindSocket {
		t.Errorf("vault /app.sock: %+v %v", e, err)
	}
	if _, err := s.v.Stat(ctx, "/pipe"); err == nil {
		t.Error("/pipe still there after the rename")
	}
	s.mustCheck()
}

// A read across chunks, some written but not yet flushed and some not,
// returns each from where it is: the buffer or the vault.
func TestReadAcrossDirtyAndCleanChunks(t *testing.T) {
	s := serve(t, false)
	const chunk = 64 << 10
	want := make([]byte, 5*chunk+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	p := s.path("big")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patch := []byte("dirty chunk two and three")
	off := int64(3*chunk - 10) // straddles chunks 2 and 3
	if _, err := f.WriteAt(patch, off); err != nil {
		t.Fatal(err)
	}
	copy(want[off:], patch)
	// Drop the kernel's cached pages, so that the reads reach the mount.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ off, n int }{{0, len(want)}, {chunk - 5, 4 * chunk}, {3 * chunk, chunk + 200}, {4*chunk + 1, chunk}} {
		got := make([]byte, w.n)
		n, err := f.ReadAt(got, int64(w.off))
		end := min(w.off+w.n, len(want))
		if n != end-w.off || (err != nil && err != io.EOF) || !bytes.Equal(got[:n], want[w.off:end]) {
			t.Errorf("read %d at %d: n %d, %v", w.n, w.off, n, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Errorf("after close: %v", err)
	}
}

// When the disk that holds the vault is full, the writer gets ENOSPC (not
// EIO), and the vault keeps what it had.
func TestDiskFullIsENOSPC(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test mounts a small tmpfs")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	home := t.TempDir()
	if err := unix.Mount("tmpfs", home, "tmpfs", 0, "size=3m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(home, unix.MNT_DETACH) })
	s := serveIn(t, home, false)
	if err := os.WriteFile(s.path("kept"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 8<<20)
	rand.Read(big) // no two chunks alike: nothing deduplicates
	f, err := os.Create(s.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(big)
	serr := f.Sync()
	cerr := f.Close()
	if !errors.Is(werr, syscall.ENOSPC) && !errors.Is(serr, syscall.ENOSPC) && !errors.Is(cerr, syscall.ENOSPC) {
		t.Fatalf("write %v, fsync %v, close %v: want ENOSPC", werr, serr, cerr)
	}
	if got, err := os.ReadFile(s.path("kept")); err != nil || string(got) != "kept\n" {
		t.Fatalf("kept: %q %v", got, err)
	}
	s.stop()
	s.mustCheck()
}
