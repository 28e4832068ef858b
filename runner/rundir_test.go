package runner

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"avfs/mount"
	"avfs/wire"
)

// OpenRunDir makes a missing root 0700, gives one of ours that others may
// enter 0700 back, and refuses a symlink, a file, another user's directory
// and a relative path.
func TestOpenRunDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, p string) // makes what is at p
		refuse bool
	}{
		{"missing", func(t *testing.T, p string) {}, false},
		{"missing parent", func(t *testing.T, p string) { os.Remove(filepath.Dir(p)) }, false},
		{"ours, 0755", func(t *testing.T, p string) { mkdir(t, p, 0o755) }, false},
		{"ours, setgid", func(t *testing.T, p string) { mkdir(t, p, 0o700); os.Chmod(p, 0o2700) }, false},
		{"symlink to ours", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "real")
			mkdir(t, target, 0o700)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"dangling symlink", func(t *testing.T, p string) { os.Symlink("/nonexistent", p) }, true},
		{"a file", func(t *testing.T, p string) { os.WriteFile(p, nil, 0o600) }, true},
		{"another user's", func(t *testing.T, p string) {
			mkdir(t, p, 0o700)
			chownOrSkip(t, p, 65534)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "home", "run")
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, p)
			before, _ := os.Lstat(p)
			d, err := OpenRunDir(p)
			if tc.refuse {
				if err == nil || !wire.HasCode(err, wire.CodeHostIO) {
					t.Fatalf("OpenRunDir: %v, want host_io", err)
				}
				if after, _ := os.Lstat(p); before != nil && (after == nil || after.Mode() != before.Mode()) {
					t.Fatalf("a refused root was changed: %v -> %v", before.Mode(), after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(d.Path())
			if err != nil || !fi.IsDir() || fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky) != 0o700 {
				t.Fatalf("root %v %v, want a directory of mode 0700", fi.Mode(), err)
			}
			if _, err := d.NewRun(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := OpenRunDir("rel/run"); !wire.HasCode(err, wire.CodeHostIO) {
		t.Fatalf("relative root: %v", err)
	}
}

// A run directory is 0700 and locked while it lives; Remove removes it
// and frees the lock.
func TestNewRun(t *testing.T) {
	d := runRoot(t)
	run, err := d.NewRun()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(run.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 || !strings.HasPrefix(filepath.Base(run.Dir), runPrefix) || filepath.Dir(run.Dir) != d.Path() {
		t.Fatalf("run directory %s: %v %v", run.Dir, fi.Mode(), err)
	}
	if _, err := lockRun(run.Dir, 0); !errors.Is(err, errRunLocked) {
		t.Fatalf("lock of a live run: %v", err)
	}
	if err := run.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(run.Dir); !os.IsNotExist(err) {
		t.Fatalf("run directory left: %v", err)
	}
	if err := run.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

// CleanStale cleans a dead run (no lock held) and its run's processes,
// leaves a live one (its lock held by this process through another open
// file, or by another process), and leaves what it cannot prove is a run
// directory of avfs's user.
func TestCleanStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hold  func(t *testing.T, run *ExecDir) // how the run is kept alive; nil: its avfs died
		clean bool
	}{
		{"dead", nil, true},
		{"alive", func(t *testing.T, run *ExecDir) {}, false},
		{"alive in another process", func(t *testing.T, run *ExecDir) {
			run.lock.Close() // the other process holds it from now on
			run.lock = nil
			holder := exec.Command("flock", "--exclusive", filepath.Join(run.Dir, lockFile), "sleep", "60")
			if err := holder.Start(); err != nil {
				t.Skipf("flock(1): %v", err)
			}
			t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
			waitLocked(t, run.Dir)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := runRoot(t)
			run, err := d.NewRun()
			if err != nil {
				t.Fatal(err)
			}
			defer run.Remove()
			root := filepath.Join(run.Dir, "root")
			mkdir(t, root, 0o755)
			if err := run.writeRecord(mountpointRecord{Dir: root, Materialized: true}); err != nil {
				t.Fatal(err)
			}
			ofRun := startSleeper(t, root, "AVFS_MOUNTPOINT="+root)
			notOfRun := startSleeper(t, root, "AVFS_MOUNTPOINT=/elsewhere")
			if tc.hold != nil {
				tc.hold(t, run)
			} else {
				run.lock.Close()
				run.lock = nil
			}

			d.CleanStale()
			_, err = os.Lstat(run.Dir)
			if gone := os.IsNotExist(err); gone != tc.clean {
				t.Fatalf("run directory gone: %v, want %v", gone, tc.clean)
			}
			if ofRun.alive() == tc.clean {
				t.Fatalf("the run's process alive: %v, want %v", !tc.clean, tc.clean)
			}
			if !notOfRun.alive() {
				t.Fatal("a process that is not the run's was killed")
			}
		})
	}
}

// The planted record: a directory of a dead pid in TMPDIR (where runs used
// to live, and anyone may write) or in the run root under another owner,
// or a symlink there, names a directory with a process in it. No run
// kills that process or touches that directory; a run directory of ours
// whose record names it (no identity to prove it) is removed, but what it
// names is left.
func TestCleanStalePlanted(t *testing.T) {
	tmp := t.TempDir()
	r := &Runner{TempDir: tmp, RunDir: filepath.Join(t.TempDir(), "run")}
	d, err := r.runRoot()
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	mkdir(t, victim, 0o755)
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// It even carries the variable the run's processes carry.
	sleeper := startSleeper(t, victim, "AVFS_MOUNTPOINT="+victim)
	record := `{"dir":"` + victim + `","materialized":true,"made":true,"kept":493}`
	plant := func(dir string) string {
		mkdir(t, dir, 0o700)
		if err := os.WriteFile(filepath.Join(dir, mountpointFile), []byte(record), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	legacy := plant(filepath.Join(tmp, "avfs-exec-3999999-x"))
	ours := plant(filepath.Join(d.Path(), "exec-3999999-ours"))
	elsewhere := plant(filepath.Join(t.TempDir(), "exec-3999999-link"))
	if err := os.Symlink(elsewhere, filepath.Join(d.Path(), "exec-3999999-link")); err != nil {
		t.Fatal(err)
	}
	var others string
	if os.Geteuid() == 0 {
		others = plant(filepath.Join(d.Path(), "exec-3999999-other"))
		chownOrSkip(t, filepath.Join(others, mountpointFile), 65534)
		chownOrSkip(t, others, 65534)
	}

	r.cleanStale()
	if !sleeper.alive() {
		t.Fatal("the process in the directory a planted record names was killed")
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Fatalf("the directory a planted record names was touched: %v", err)
	}
	for _, dir := range []string{legacy, elsewhere, others} {
		if _, err := os.Stat(dir); dir != "" && err != nil {
			t.Fatalf("%s was removed: %v", dir, err)
		}
	}
	if _, err := os.Lstat(ours); !os.IsNotExist(err) {
		t.Fatalf("the dead run directory of ours is left: %v", err)
	}
}

// What cleanup does at a --mountpoint it recorded: it removes or empties
// the directory only while it is the one recorded (identity), a mount
// point avfs made only when empty, and never kills the processes that sit
// in a directory that is not mounted.
func TestCleanRunMountpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rec      mountpointRecord
		content  bool                  // something is in the directory
		replace  bool                  // the directory was replaced since
		wantGone bool                  // the directory is removed
		want     func(dir string) bool // what must hold of it otherwise
	}{
		{name: "made copy", rec: mountpointRecord{Materialized: true, Made: true}, content: true, wantGone: true},
		{name: "made copy, replaced", rec: mountpointRecord{Materialized: true, Made: true}, content: true, replace: true},
		{name: "made mount point, empty", rec: mountpointRecord{Made: true}, wantGone: true},
		{name: "made mount point, not empty", rec: mountpointRecord{Made: true}, content: true},
		{name: "kept", rec: mountpointRecord{Materialized: true, Kept: uint32(fs.ModeDir | 0o751)}, content: true,
			want: func(dir string) bool {
				ents, _ := os.ReadDir(dir)
				fi, _ := os.Stat(dir)
				return len(ents) == 0 && fi.Mode().Perm() == 0o751
			}},
		{name: "kept, replaced", rec: mountpointRecord{Materialized: true, Kept: uint32(fs.ModeDir | 0o751)}, content: true, replace: true},
		{name: "not made", rec: mountpointRecord{}, content: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, mp := newTestRun(t)
			fi, _ := os.Lstat(mp)
			rec := tc.rec
			rec.Dir, rec.ID = mp, idOf(fi)
			if tc.replace {
				// The new one is made while the old one still exists, so
				// it cannot get the old inode number (a freed inode is
				// often reused; a new empty directory that takes it holds
				// nothing anyone else put there).
				if err := os.Rename(mp, mp+".old"); err != nil {
					t.Fatal(err)
				}
				mkdir(t, mp, 0o700)
				os.Remove(mp + ".old")
			}
			if tc.content {
				if err := os.WriteFile(filepath.Join(mp, "f"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := run.writeRecord(rec); err != nil {
				t.Fatal(err)
			}
			// Not the run's (another user's, say) and merely in the directory.
			sitting := startSleeper(t, mp)
			run.lock.Close()
			run.lock = nil

			cleanRun(run.Dir)
			if !sitting.alive() {
				t.Fatal("a process in an unmounted --mountpoint was killed")
			}
			_, err := os.Lstat(mp)
			switch {
			case tc.wantGone:
				if !os.IsNotExist(err) {
					t.Fatalf("--mountpoint left: %v", err)
				}
			case tc.want != nil:
				if !tc.want(mp) {
					t.Fatal("--mountpoint not as it was before the run")
				}
			default:
				if _, err := os.Stat(filepath.Join(mp, map[bool]string{true: "f", false: "."}[tc.content])); err != nil {
					t.Fatalf("--mountpoint touched: %v", err)
				}
			}
			if _, err := os.Lstat(run.Dir); !os.IsNotExist(err) {
				t.Fatalf("run directory left: %v", err)
			}
		})
	}
}

// An avfs mount at the recorded directory is unmounted after the
// processes inside it are killed; a process that sat in the directory
// before the mount hid it is not. A mount that is not avfs's (another
// source) is left mounted, with its processes.
func TestCleanRunMount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fsname  string
		unmount bool
	}{
		{"avfs mount", "avfs:v", true},
		{"another vault's avfs mount", "avfs:other", false},
		{"not avfs", "loop", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, mp := newTestRun(t)
			underneath := startSleeper(t, mp)
			serveLoopback(t, mp, tc.fsname)
			inside := startSleeper(t, mp)
			if err := run.writeRecord(mountpointRecord{Dir: mp, FsName: "avfs:v"}); err != nil {
				t.Fatal(err)
			}
			run.lock.Close()
			run.lock = nil

			cleanRun(run.Dir)
			if mounted := mount.IsMounted(mp); mounted == tc.unmount {
				t.Fatalf("mounted: %v, want %v", mounted, !tc.unmount)
			}
			if inside.alive() == tc.unmount {
				t.Fatalf("the process inside the mount alive: %v, want %v", !tc.unmount, !tc.unmount)
			}
			if !underneath.alive() {
				t.Fatal("the process underneath the mount was killed")
			}
			if tc.unmount {
				if _, err := os.Lstat(run.Dir); !os.IsNotExist(err) {
					t.Fatalf("run directory left: %v", err)
				}
			}
		})
	}
}

// newTestRun makes a run in a fresh run root (removed when the test ends)
// and an empty directory mp for its --mountpoint.
func newTestRun(t *testing.T) (run *ExecDir, mp string) {
	t.Helper()
	run, err := runRoot(t).NewRun()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Remove() })
	mp = filepath.Join(t.TempDir(), "mp")
	mkdir(t, mp, 0o700)
	return run, mp
}

// avfsMountAt tells an avfs FUSE mount from other mounts and from no
// mount, at a path with a space (escaped in the mount table).
func TestAvfsMountAt(t *testing.T) {
	mp := filepath.Join(t.TempDir(), "with space")
	mkdir(t, mp, 0o700)
	if _, ok, err := avfsMountAt(mp); ok || err != nil {
		t.Fatalf("not mounted: %v %v", ok, err)
	}
	serveLoopback(t, mp, "avfs:v")
	if m, ok, err := avfsMountAt(mp); !ok || err != nil || m.Source != "avfs:v" || m.Major == 0 && m.Minor == 0 {
		t.Fatalf("avfs mount: %+v %v %v", m, ok, err)
	}
	other := filepath.Join(t.TempDir(), "other")
	mkdir(t, other, 0o700)
	serveLoopback(t, other, "loop")
	if _, ok, err := avfsMountAt(other); ok || err != nil {
		t.Fatalf("another mount: %v %v", ok, err)
	}
}

// removeAt never acts on /, on a path that is not clean and absolute, or
// without an identity; nor through a symlink put where the directory was.
func TestRemoveAtRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	mkdir(t, dir, 0o700)
	fi, _ := os.Lstat(dir)
	id := idOf(fi)
	if err := os.WriteFile(filepath.Join(dir, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "", "rel", dir + "/", dir + "/../d", link} {
		if err := removeAt(p, id, true, false, 0); err == nil {
			t.Errorf("removeAt(%q) did not fail", p)
		}
	}
	if err := removeAt(dir, nil, true, false, 0); !errors.Is(err, errNotProven) {
		t.Errorf("no identity: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Fatalf("removed: %v", err)
	}
}

func runRoot(t *testing.T) *RunDir {
	t.Helper()
	d, err := OpenRunDir(filepath.Join(t.TempDir(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdir(t *testing.T, p string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func chownOrSkip(t *testing.T, p string, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	if err := os.Lchown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// waitLocked waits until another process holds the lock of the run in dir.
func waitLocked(t *testing.T, dir string) {
	t.Helper()
	for i := 0; ; i++ {
		f, err := lockRun(dir, 0)
		if errors.Is(err, errRunLocked) {
			return
		}
		if err == nil {
			f.Close()
		}
		if i > 500 {
			t.Fatal("the lock was never taken")
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
	}
}

// serveLoopback serves an empty directory over FUSE at mp from this
// process under the source fsname (as avfs names its mounts avfs:<vault>),
// until the test ends or someone unmounts it.
func serveLoopback(t *testing.T, mp, fsname string) {
	t.Helper()
	if err := mount.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE is required in CI: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
	root, err := gofs.NewLoopbackRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := &gofs.Options{}
	opts.DirectMount = os.Geteuid() == 0
	opts.FsName, opts.Name = fsname, "avfs"
	srv, err := gofs.Mount(mp, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mount.IsMounted(mp) {
			mount.KillHolders(mp, 0)
			// Not with mount.Unmount: it refuses what is not avfs's.
			if srv.Unmount() != nil {
				_ = syscall.Unmount(mp, syscall.MNT_DETACH)
			}
		}
		srv.Wait()
	})
}
