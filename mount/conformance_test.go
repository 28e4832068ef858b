package mount

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"avfs/vault"
)

// otherUID is the uid (and gid) of the processes the conformance tests run
// as another user: nobody.
const otherUID = 65534

// asOther runs sh -c script as otherUID in dir and returns its errno-ish
// outcome: nil, or the error with its output.
func asOther(t *testing.T, dir, script string) error {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// openToOthers makes the directories above the mount point traversable by
// other users (t.TempDir makes them 0700).
func openToOthers(t *testing.T, s *served) {
	t.Helper()
	for d := filepath.Dir(s.dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func mustWrite(t *testing.T, p string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// Without --allow-other, FUSE refuses every other uid before avfs sees it.
func TestConformanceOtherUIDRefusedByDefault(t *testing.T) {
	s := serve(t, false)
	openToOthers(t, s)
	mustWrite(t, s.path("open.txt"), "for everyone\n", 0o644)
	if err := asOther(t, "/", "cat "+s.path("open.txt")); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("another uid read a mount without allow_other: %v", err)
	}
}

// With allow_other the kernel checks other users' access against the
// stored modes (default_permissions), and mode 0 is mode 0.
func TestConformanceAllowOther(t *testing.T) {
	s := serve(t, false, "AVFS_MOUNT_ALLOW_OTHER=1")
	openToOthers(t, s)
	mustWrite(t, s.path("open.txt"), "for everyone\n", 0o644)
	mustWrite(t, s.path("secret.txt"), "root only\n", 0o600)
	mustWrite(t, s.path("shared.txt"), "", 0o666)
	if err := os.Mkdir(s.path("drop"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.path("drop"), 0o777); err != nil {
		t.Fatal(err)
	}
	// Owned by the other user, then chmod 000: its owner (not root) is refused.
	mustWrite(t, s.path("locked.txt"), "nobody's\n", 0o644)
	if err := os.Chown(s.path("locked.txt"), otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.path("locked.txt"), 0); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(s.path("locked.txt"), &st); err != nil || st.Mode&0o7777 != 0 {
		t.Fatalf("chmod 000 shows as %o (%v)", st.Mode&0o7777, err)
	}

	for _, c := range []struct {
		script string
		denied bool
	}{
		{"cat open.txt", false},
		{"cat secret.txt", true},
		{"echo more >> open.txt", true},
		{"echo more >> shared.txt", false},
		{"cat locked.txt", true},
		{"echo x > new.txt", true}, // the root directory is 0755 root's
		{"echo mine > drop/mine.txt", false},
		{"rm open.txt", true},
	} {
		err := asOther(t, s.dir, c.script)
		if c.denied != (err != nil) || err != nil && !strings.Contains(err.Error(), "denied") {
			t.Errorf("%s as uid %d: %v (want denied: %v)", c.script, otherUID, err, c.denied)
		}
	}
	if err := syscall.Stat(s.path("drop/mine.txt"), &st); err != nil || st.Uid != otherUID || st.Gid != otherUID {
		t.Errorf("a file another user created: uid %d gid %d (%v), want %d", st.Uid, st.Gid, err, otherUID)
	}
	if got, _ := os.ReadFile(s.path("shared.txt")); string(got) != "more\n" {
		t.Errorf("shared.txt = %q", got)
	}
	// Root reads the locked file (CAP_DAC_OVERRIDE), as on a local disk.
	if got, err := os.ReadFile(s.path("locked.txt")); err != nil || string(got) != "nobody's\n" {
		t.Errorf("root reads a mode 0 file: %q %v", got, err)
	}
	s.stop()
	s.mustCheck()
}

// Character and block device nodes are kept as their kind and number,
// open nothing (the mount is nodev), and survive a remount, export and
// import.
func TestConformanceDeviceNodes(t *testing.T) {
	s := serve(t, false)
	devs := []struct {
		name string
		typ  uint32
		rdev uint64
		kind vault.Kind
	}{
		{"null", syscall.S_IFCHR, unix.Mkdev(1, 3), vault.KindCharDev},
		{"loop9", syscall.S_IFBLK, unix.Mkdev(7, 9), vault.KindBlockDev},
	}
	for _, d := range devs {
		if err := unix.Mknod(s.path(d.name), d.typ|0o640, int(d.rdev)); err != nil {
			t.Fatalf("mknod %s: %v", d.name, err)
		}
	}
	check := func(when string, dir string) {
		t.Helper()
		for _, d := range devs {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, d.name), &st); err != nil || st.Mode&unix.S_IFMT != d.typ || st.Rdev != d.rdev || st.Mode&0o7777 != 0o640 || st.Size != 0 {
				t.Errorf("%s: stat %s: mode %o rdev %d:%d size %d %v", when, d.name, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Size, err)
			}
		}
	}
	check("mounted", s.dir)
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]os.FileMode{}
	for _, e := range ents {
		types[e.Name()] = e.Type()
	}
	if types["null"] != os.ModeDevice|os.ModeCharDevice || types["loop9"] != os.ModeDevice {
		t.Errorf("readdir types: %v", types)
	}
	for _, d := range devs {
		f, err := os.OpenFile(s.path(d.name), os.O_RDWR, 0)
		if err == nil {
			f.Close()
			t.Errorf("opened device node %s on a nodev mount", d.name)
		} else if !errors.Is(err, syscall.EACCES) {
			t.Errorf("open %s: %v, want EACCES", d.name, err)
		}
	}
	if err := os.Rename(s.path("null"), s.path("null2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.path("null2"), s.path("null")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, d := range devs {
		e, err := s.v.Stat(ctx, "/"+d.name)
		if err != nil || e.Kind != d.kind || e.Rdev != d.rdev || e.Target != "" {
			t.Errorf("vault stat %s: %+v %v", d.name, e, err)
		}
	}
	s.stop()
	s.mustCheck()
	s.start(false)
	check("remounted", s.dir)

	// Export as root makes the nodes on the host; import keeps them.
	host := filepath.Join(t.TempDir(), "out")
	res, err := s.v.Export(ctx, "/", host, false)
	if err != nil || res.Special != 2 || res.SkippedDevices != 0 {
		t.Fatalf("export: %+v %v", res, err)
	}
	check("exported", host)
	other, err := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"}).Create(ctx, "imported")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if res, err := other.Import(ctx, host, "/in"); err != nil || res.Special != 2 {
		t.Fatalf("import: %+v %v", res, err)
	}
	for _, d := range devs {
		if e, err := other.Stat(ctx, "/in/"+d.name); err != nil || e.Kind != d.kind || e.Rdev != d.rdev || e.Mode != 0o640 {
			t.Errorf("imported %s: %+v %v", d.name, e, err)
		}
	}
	if rep, err := other.Check(ctx); err != nil || !rep.OK {
		t.Errorf("check of the imported vault: %+v %v", rep, err)
	}
}

// A name longer than 255 bytes fails with ENAMETOOLONG in every call,
// whether or not it exists; 255 bytes is accepted.
func TestConformanceNameTooLong(t *testing.T) {
	s := serve(t, false)
	mustWrite(t, s.path("f"), "x", 0o644)
	if err := os.Mkdir(s.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 256)
	lp := s.path(long)
	ops := map[string]func() error{
		"lstat":         func() error { var st syscall.Stat_t; return syscall.Lstat(lp, &st) },
		"chmod":         func() error { return syscall.Chmod(lp, 0o600) },
		"chown":         func() error { return syscall.Chown(lp, 0, 0) },
		"unlink":        func() error { return syscall.Unlink(lp) },
		"rmdir":         func() error { return syscall.Rmdir(lp) },
		"rename from":   func() error { return syscall.Rename(lp, s.path("g")) },
		"rename to":     func() error { return syscall.Rename(s.path("f"), lp) },
		"rename dir to": func() error { return syscall.Rename(s.path("d"), filepath.Join(s.dir, "d", long)) },
		"create": func() error {
			fd, err := syscall.Open(lp, syscall.O_CREAT|syscall.O_WRONLY, 0o644)
			if err == nil {
				syscall.Close(fd)
			}
			return err
		},
		"open":    func() error { fd, err := syscall.Open(lp, syscall.O_RDONLY, 0); syscall.Close(fd); return err },
		"mkdir":   func() error { return syscall.Mkdir(lp, 0o755) },
		"mkfifo":  func() error { return syscall.Mkfifo(lp, 0o644) },
		"link":    func() error { return syscall.Link(s.path("f"), lp) },
		"symlink": func() error { return syscall.Symlink("f", lp) },
		"in dir":  func() error { return syscall.Mkdir(filepath.Join(s.dir, "d", long), 0o755) },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Errorf("%s of a 256-byte name: %v, want ENAMETOOLONG", name, err)
		}
	}
	ok := s.path(strings.Repeat("m", 255))
	mustWrite(t, ok, "fits", 0o644)
	if err := os.Rename(ok, s.path("short")); err != nil {
		t.Errorf("rename a 255-byte name: %v", err)
	}
	s.stop()
	s.mustCheck()
}

// fallocate's punch-hole and zero-range make their range read as zeros;
// whole chunks they cover become holes, which the vault does not store.
// Collapse and insert range are refused.
func TestConformanceFallocate(t *testing.T) {
	s := serve(t, false)
	const cs = vault.ChunkSize
	data := make([]byte, 3*cs+100)
	rand.Read(data)
	p := s.path("f")

	rep, err := s.v.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	chunksBefore := rep.Chunks
	// Written and punched in one commit: the middle chunk, punched whole, is a hole.
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	const keep, punch, zero = unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE, unix.FALLOC_FL_ZERO_RANGE
	if err := unix.Fallocate(int(f.Fd()), punch|keep, cs, cs); err != nil {
		t.Fatalf("punch a whole chunk: %v", err)
	}
	clear(data[cs : 2*cs])
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The stager may have stored the middle chunk before the punch: gc
	// frees it, nothing refers to it.
	if _, err := s.v.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep, err = s.v.Check(context.Background()); err != nil || rep.Chunks-chunksBefore != 3 {
		t.Errorf("a file of 4 chunks, one punched whole, stored %d chunks (%v), want 3", rep.Chunks-chunksBefore, err)
	}

	f, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name      string
		mode      uint32
		off, size int64
		grows     bool
	}{
		{"punch across chunks", punch | keep, 100, cs + 50, false},
		{"punch past the end", punch | keep, 3*cs + 50, cs, false},
		{"zero a partial range", zero, 2*cs + 10, 300, false},
		{"zero keeping the size past the end", zero | keep, 3*cs + 90, cs, false},
		{"zero growing the file", zero, 3*cs + 50, cs, true},
	} {
		if err := unix.Fallocate(int(f.Fd()), c.mode, c.off, c.size); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		end := c.off + c.size
		if c.grows && end > int64(len(data)) {
			data = append(data, make([]byte, end-int64(len(data)))...)
		}
		clear(data[min(c.off, int64(len(data))):min(end, int64(len(data)))])
		fi, err := f.Stat()
		if err != nil || fi.Size() != int64(len(data)) {
			t.Fatalf("%s: size %d, want %d (%v)", c.name, fi.Size(), len(data), err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: content differs (%v)", c.name, err)
		}
	}
	for name, mode := range map[string]uint32{
		"collapse range":     unix.FALLOC_FL_COLLAPSE_RANGE,
		"insert range":       unix.FALLOC_FL_INSERT_RANGE,
		"punch without keep": punch,
	} {
		if err := unix.Fallocate(int(f.Fd()), mode, 0, cs); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("%s: %v, want EOPNOTSUPP", name, err)
		}
	}
	f.Close()
	s.stop()
	var buf bytes.Buffer
	if _, err := s.v.ReadFile(context.Background(), "/f", &buf); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("the vault's content differs after unmount (%v)", err)
	}
	s.mustCheck()
}

// Every change moves the times pjdfstest checks, as on a local disk: a
// node's ctime on chmod, chown, truncate, link, unlink of another name and
// rename; its mtime on truncate; a directory's mtime and ctime when its
// entries change. The clock's nanoseconds separate the stats, so no sleep.
func TestConformanceChangeTimes(t *testing.T) {
	s := serve(t, false)
	stat := func(p string) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	after := func(a, b unix.Timespec) bool { return b.Nano() > a.Nano() }
	for _, c := range []struct {
		name      string
		op        func(f, d string) error
		file      string // the node whose times are checked, "" for none
		mtime     bool   // the node's mtime moves too
		dirs      []string
		unchanged bool // the node's ctime stays
	}{
		{"chmod", func(f, _ string) error { return unix.Chmod(f, 0o600) }, "f", false, nil, false},
		{"chown", func(f, _ string) error { return unix.Chown(f, otherUID, otherUID) }, "f", false, nil, false},
		{"truncate", func(f, _ string) error { return unix.Truncate(f, 1) }, "f", true, nil, false},
		{"link", func(f, d string) error { return unix.Link(f, filepath.Join(d, "l")) }, "f", false, []string{"d"}, false},
		{"unlink another name", func(f, d string) error {
			if err := unix.Link(f, filepath.Join(d, "l")); err != nil {
				return err
			}
			return unix.Unlink(filepath.Join(d, "l"))
		}, "f", false, []string{"d"}, false},
		{"rename", func(f, d string) error { return unix.Rename(f, filepath.Join(d, "g")) }, "d/g", false, []string{".", "d"}, false},
		{"mkfifo", func(_, d string) error { return unix.Mkfifo(filepath.Join(d, "p"), 0o600) }, "", false, []string{"d"}, false},
		{"rmdir", func(_, d string) error { return unix.Rmdir(filepath.Join(d, "e")) }, "", false, []string{"d"}, false},
		{"utimensat omitting both", func(f, _ string) error {
			return unix.UtimesNanoAt(unix.AT_FDCWD, f, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}, 0)
		}, "f", false, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := filepath.Join(s.dir, strings.ReplaceAll(c.name, " ", "_"))
			f, d := filepath.Join(base, "f"), filepath.Join(base, "d")
			if err := os.MkdirAll(filepath.Join(d, "e"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, f, "data", 0o644)
			node := f
			if c.file != "" && c.file != "f" {
				node = filepath.Join(base, c.file)
			}
			before := stat(f)
			dirsBefore := map[string]unix.Stat_t{}
			for _, dir := range c.dirs {
				dirsBefore[dir] = stat(filepath.Join(base, dir))
			}
			if err := c.op(f, d); err != nil {
				t.Fatal(err)
			}
			if c.file != "" {
				st := stat(node)
				if moved := after(before.Ctim, st.Ctim); moved == c.unchanged {
					t.Errorf("ctime %d → %d (want moved: %v)", before.Ctim.Nano(), st.Ctim.Nano(), !c.unchanged)
				}
				if c.mtime && !after(before.Mtim, st.Mtim) {
					t.Errorf("mtime did not move: %d → %d", before.Mtim.Nano(), st.Mtim.Nano())
				}
				if !c.mtime && st.Mtim != before.Mtim {
					t.Errorf("mtime moved: %d → %d", before.Mtim.Nano(), st.Mtim.Nano())
				}
			}
			for _, dir := range c.dirs {
				b, a := dirsBefore[dir], stat(filepath.Join(base, dir))
				if !after(b.Ctim, a.Ctim) || !after(b.Mtim, a.Mtim) {
					t.Errorf("directory %s: ctime %d → %d, mtime %d → %d", dir, b.Ctim.Nano(), a.Ctim.Nano(), b.Mtim.Nano(), a.Mtim.Nano())
				}
			}
		})
	}
	s.stop()
	s.mustCheck()
}
