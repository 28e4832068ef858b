package mount

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"avfs/vault"
	"avfs/wire"
)

func readVault(t *testing.T, v *vault.Vault, p string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := v.ReadFile(context.Background(), p, &b); err != nil {
		t.Fatalf("vault read %s: %v", p, err)
	}
	return b.Bytes()
}

func TestExecBitsSymlinksHardLinks(t *testing.T) {
	s := serve(t, false)
	script := s.path("run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./run.sh", "ok")
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "ran ok\n" {
		t.Fatalf("run script: %q %v", out, err)
	}
	if err := os.Symlink("run.sh", s.path("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(script, s.path("hard")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(script)
	if st := fi.Sys().(*syscall.Stat_t); st.Nlink != 2 {
		t.Fatalf("nlink %d", st.Nlink)
	}
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(script, time.Unix(1000, 0), time.Unix(2000, 0)); err != nil {
		t.Fatal(err)
	}
	s.stop()
	ctx := context.Background()
	e, err := s.v.Stat(ctx, "/run.sh")
	if err != nil || e.Mode != 0o700 || e.Mtime.Unix() != 2000 || e.Nlink != 2 {
		t.Fatalf("vault entry %+v %v", e, err)
	}
	if l, _ := s.v.Stat(ctx, "/link"); l.Kind != vault.KindSymlink || l.Target != "run.sh" {
		t.Fatalf("symlink %+v", l)
	}
	s.mustCheck()
}

func TestQuotaSurfacesAsEDQUOTAndKeepsData(t *testing.T) {
	s := serve(t, false)
	ctx := context.Background()
	one := int64(1)
	if _, err := s.v.SetQuota(ctx, vault.QuotaChange{MaxFileSizeMB: &one}); err != nil {
		t.Fatal(err)
	}
	// A write past the file size quota fails at write().
	f, err := os.Create(s.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 2<<20))
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("write past max_file_size: %v", err)
	}
	f.Close() // the part before the limit was written (a short write), as on any file system
	if err := os.Remove(s.path("big")); err != nil {
		t.Fatal(err)
	}
	// A vault size quota lowered under buffered writes fails at flush
	// (a write that crosses it fails at write(): TestVaultQuotaFailsAtWrite),
	// and the data is kept for a retry.
	big, ten := int64(0), int64(10)
	if _, err := s.v.SetQuota(ctx, vault.QuotaChange{MaxFileSizeMB: &big, MaxSizeMB: &ten}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<19) // 1.5 MiB
	rand.Read(data)
	f, err = os.Create(s.path("kept"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatalf("buffered write: %v", err)
	}
	if _, err := s.v.SetQuota(ctx, vault.QuotaChange{MaxSizeMB: &one}); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("fsync over quota: %v", err)
	}
	if u, _ := s.v.Usage(ctx); u.Bytes != 0 {
		t.Fatalf("vault changed by a refused flush: %+v", u)
	}
	// The data is still there: reads see it, and a retry after raising the quota commits it.
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back buffered data: %v", err)
	}
	if _, err := s.v.SetQuota(ctx, vault.QuotaChange{MaxSizeMB: &ten}); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after raising the quota: %v", err)
	}
	f.Close()
	if !bytes.Equal(readVault(t, s.v, "/kept"), data) {
		t.Fatal("vault content differs")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil || st.Blocks*uint64(st.Bsize) != 10<<20 {
		t.Fatalf("statfs does not reflect the quota: %+v %v", st, err)
	}
	s.stop()
	s.mustCheck()
}

func TestLargeFileSpillsAndPersistsOnlyChangedChunks(t *testing.T) {
	s := serve(t, false, "AVFS_MOUNT_MEMLIMIT=1048576")
	data := make([]byte, 20<<20+123)
	rand.Read(data)
	p := s.path("large.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 100000 { // odd-sized writes across chunk borders
		end := min(off+100000, len(data))
		if _, err := f.Write(data[off:end]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back through the mount: %v", err)
	}
	// A small edit in the middle rewrites one chunk.
	f, _ = os.OpenFile(p, os.O_WRONLY, 0)
	f.WriteAt([]byte("EDIT"), 10<<20)
	f.Close()
	copy(data[10<<20:], "EDIT")
	if !bytes.Equal(readVault(t, s.v, "/large.bin"), data) {
		t.Fatal("vault content differs")
	}
	s.stop()
	s.mustCheck()
}

func TestKillLeavesVaultConsistentAndStaleMountIsCleaned(t *testing.T) {
	s := serve(t, false)
	if err := os.WriteFile(s.path("flushed"), []byte("safe"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(s.path("unflushed"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("may be lost"))
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
	f.Close()
	if _, err := os.Stat(s.dir); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after kill, stat = %v (want ENOTCONN)", err)
	}
	s.mustCheck()
	if string(readVault(t, s.v, "/flushed")) != "safe" {
		t.Fatal("flushed data lost")
	}
	// The next mount on that directory cleans the stale mount up.
	s.start(false)
	if b, err := os.ReadFile(s.path("flushed")); err != nil || string(b) != "safe" {
		t.Fatalf("remount read: %q %v", b, err)
	}
	s.stop()
	s.mustCheck()
}

func TestOneWriterMountAndNoRestoreWhileMounted(t *testing.T) {
	s := serve(t, false)
	ctx := context.Background()
	if _, err := s.v.SaveCheckpoint(ctx, "c", ""); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := Mount(ctx, s.v, other, Options{}); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Fatalf("second writer mount: %v", err)
	}
	if _, err := s.v.RestoreCheckpoint(ctx, "c"); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Fatalf("restore while mounted: %v", err)
	}
	// A read-only mount may sit beside the writer.
	ro := &served{t: t, store: s.store, v: s.v, dir: filepath.Join(t.TempDir(), "ro")}
	os.Mkdir(ro.dir, 0o755)
	ro.start(true)
	defer ro.stop()
	os.WriteFile(s.path("w"), []byte("x"), 0o644)
	time.Sleep(1100 * time.Millisecond) // past the read-only mount's attribute cache
	if b, err := os.ReadFile(ro.path("w")); err != nil || string(b) != "x" {
		t.Fatalf("read-only mount read: %q %v", b, err)
	}
	if err := os.WriteFile(ro.path("nope"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write on read-only mount: %v", err)
	}
	s.stop()
	if _, err := s.v.RestoreCheckpoint(ctx, "c"); err != nil {
		t.Fatalf("restore after unmount: %v", err)
	}
}

func TestUnmountBusyNamesHolderAndLazyDetaches(t *testing.T) {
	s := serve(t, false)
	sleeper := exec.Command("sleep", "30")
	sleeper.Dir = s.dir
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	time.Sleep(100 * time.Millisecond)
	err := Unmount(s.dir, false)
	if !wire.HasCode(err, wire.CodeMountBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", sleeper.Process.Pid)) {
		t.Fatalf("busy unmount: %v", err)
	}
	if err := Unmount(s.dir, true); err != nil {
		t.Fatalf("lazy unmount: %v", err)
	}
	if IsMounted(s.dir) {
		t.Fatal("still mounted after lazy unmount")
	}
	if err := Unmount(s.dir, false); !wire.HasCode(err, wire.CodeNotMounted) {
		t.Fatalf("second unmount: %v", err)
	}
}

func TestParallelWritersFromGoroutinesAndProcesses(t *testing.T) {
	s := serve(t, false)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			dir := s.path(fmt.Sprintf("g%d", g))
			if err := os.Mkdir(dir, 0o755); err != nil {
				errs <- err
				return
			}
			for i := 0; i < 20; i++ {
				p := filepath.Join(dir, fmt.Sprintf("f%d", i))
				if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	var cmds []*exec.Cmd
	for p := 0; p < 3; p++ {
		c := exec.Command("sh", "-c", fmt.Sprintf("mkdir p%d && for i in $(seq 1 20); do echo $i > p%d/f$i; done && echo done >> shared.log", p, p))
		c.Dir = s.dir
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	wg.Wait()
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.stop()
	ctx := context.Background()
	n := 0
	s.v.Walk(ctx, "/", func(e vault.Entry) error {
		if e.Kind == vault.KindFile {
			n++
		}
		return nil
	})
	if n != 8*20+3*20+1 {
		t.Fatalf("%d files in the vault", n)
	}
	if got := string(readVault(t, s.v, "/shared.log")); strings.Count(got, "done") != 3 {
		t.Fatalf("shared.log %q", got)
	}
	s.mustCheck()
}

func TestUnavailableIsTyped(t *testing.T) {
	// Available must answer with a typed error or nil, never panic.
	if err := Available(); err != nil && !wire.HasCode(err, wire.CodeFuseUnavailable) {
		t.Fatalf("untyped: %v", err)
	}
	_ = io.EOF
}

func TestMmapSharedWritesAndLocks(t *testing.T) {
	s := serve(t, false)
	p := s.path("mapped")
	if err := os.WriteFile(p, bytes.Repeat([]byte("."), 3*vault.ChunkSize), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 3*vault.ChunkSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if m[100] != '.' {
		t.Fatal("mmap read")
	}
	copy(m[vault.ChunkSize+10:], "MAPPED")
	const msSync = 4
	if _, _, en := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafePointer(m)), uintptr(len(m)), msSync); en != 0 {
		t.Fatal(en)
	}
	syscall.Munmap(m)
	f.Close()
	// Another process sees the change, and flock excludes between processes.
	out := run(t, s.dir, `dd if=mapped bs=1 skip=65546 count=6 2>/dev/null; echo
		flock -n mapped sleep 2 & sleep 0.5
		if flock -n mapped true; then echo not-locked; else echo locked; fi
		wait`)
	if out != "MAPPED\nlocked\n" {
		t.Fatalf("%q", out)
	}
	s.stop()
	got := readVault(t, s.v, "/mapped")
	if string(got[vault.ChunkSize+10:vault.ChunkSize+16]) != "MAPPED" {
		t.Fatal("mmap write not in the vault")
	}
	s.mustCheck()
}

// TestConcurrentAppendsFromProcesses appends from several processes, each
// opening and closing the file per line, so opens, flushes and releases of
// one file interleave: no line may be lost and no byte zeroed. (The kernel
// sends O_APPEND writes at its own idea of the size, which lags when
// appenders race; the mount puts them at the real end.)
func TestConcurrentAppendsFromProcesses(t *testing.T) {
	s := serve(t, false)
	const procs, lines = 8, 100
	out := run(t, s.dir, fmt.Sprintf(`for p in $(seq 1 %d); do (for i in $(seq 1 %d); do echo "$p $i" >> log; done) & done; wait; wc -l < log`, procs, lines))
	if strings.TrimSpace(out) != fmt.Sprint(procs*lines) {
		t.Fatalf("%s lines, want %d", strings.TrimSpace(out), procs*lines)
	}
	s.stop()
	got := readVault(t, s.v, "/log")
	if bytes.IndexByte(got, 0) >= 0 || bytes.Count(got, []byte("\n")) != procs*lines {
		t.Fatalf("log in the vault has %d lines, NUL at %d", bytes.Count(got, []byte("\n")), bytes.IndexByte(got, 0))
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		seen[l] = true
	}
	for p := 1; p <= procs; p++ {
		for i := 1; i <= lines; i++ {
			if l := fmt.Sprintf("%d %d", p, i); !seen[l] {
				t.Fatalf("line %q missing from the log", l)
			}
		}
	}
	s.mustCheck()
}

// Pages written through a shared mapping stay where they were written, even
// when the kernel writes them back through another process's O_APPEND
// handle of the file.
func TestMmapWritebackBesideAppender(t *testing.T) {
	s := serve(t, false)
	p := s.path("shared")
	if err := os.WriteFile(p, bytes.Repeat([]byte("."), 3*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 3*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	// Opened last, the appender's handle is the one the kernel writes back through.
	app, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	copy(m[4096+7:], "MIDDLE")
	const msSync = 4
	if _, _, en := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafePointer(m)), uintptr(len(m)), msSync); en != 0 {
		t.Fatal(en)
	}
	syscall.Munmap(m)
	f.Close()
	if _, err := app.Write([]byte("END\n")); err != nil {
		t.Fatal(err)
	}
	app.Close()
	s.stop()
	got := readVault(t, s.v, "/shared")
	if len(got) != 3*4096+4 || string(got[4096+7:4096+13]) != "MIDDLE" || string(got[3*4096:]) != "END\n" {
		t.Fatalf("size %d, middle %q, tail %q", len(got), got[4096+7:4096+13], got[len(got)-4:])
	}
}

// A mount whose server was killed after the kernel cached the mount
// point's attributes (a writer mount lets it keep them for an hour) still
// answers stat from that cache; the next mount there finds it dead anyway
// and cleans it up, instead of failing with "already a mount point".
func TestStaleMountWithCachedAttributesIsCleaned(t *testing.T) {
	s := serve(t, false)
	if err := os.WriteFile(s.path("f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the mount point's attributes, cached
		if _, err := os.Stat(s.dir); err != nil {
			t.Fatal(err)
		}
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
	if err := CleanStale(s.dir); err != nil {
		t.Fatal(err)
	}
	if IsMounted(s.dir) {
		t.Fatal("the dead mount is still there after CleanStale")
	}
	s.start(false)
	if b, err := os.ReadFile(s.path("f")); err != nil || string(b) != "x" {
		t.Fatalf("remount read: %q %v", b, err)
	}
	s.stop()
}
