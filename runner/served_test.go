package runner

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"avfs/mount"
)

// loopback serves a directory of the host over FUSE from this process, as
// avfs proxy exec serves the run's mount, and returns the mount point.
func loopback(t *testing.T) string {
	t.Helper()
	if err := mount.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE is required in CI: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
	src, mnt := t.TempDir(), t.TempDir()
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	opts := &fs.Options{}
	opts.DirectMount = os.Geteuid() == 0 // as avfs mounts: no fusermount3 needed
	srv, err := fs.Mount(mnt, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return mnt
}

// TestDirServedFUSE runs commands in a FUSE mount that this process serves,
// while the garbage collector stops the world over and over: a child that
// touched the mount between fork and exec would hang the test. Host
// programs are forked from a thread already in the directory; programs and
// #! interpreters on the mount go through the trampoline.
func TestDirServedFUSE(t *testing.T) {
	mnt := loopback(t)
	sub := filepath.Join(mnt, "sub dir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "prog"), []byte("#!/bin/sh\necho \"prog $1 $(pwd)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	interp := filepath.Join(mnt, "interp")
	if err := os.WriteFile(interp, []byte("#!/bin/sh\necho \"interp $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A script on the host whose interpreter is on the mount.
	hostScript := filepath.Join(t.TempDir(), "host-script")
	if err := os.WriteFile(hostScript, []byte("#!"+interp+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv   []string
		served bool
		out    string
	}{
		{[]string{"pwd"}, false, sub + "\n"},
		{[]string{"env"}, false, "PWD=/somewhere\nPATH=/usr/bin:/bin\n"},
		{[]string{"./prog", "x"}, true, "prog x " + sub + "\n"},
		{[]string{hostScript}, true, "interp " + hostScript + "\n"},
	} {
		path, status := lookPath(tc.argv[0], testEnv, sub)
		if status != 0 {
			t.Fatalf("%s: not found", tc.argv[0])
		}
		if got := served(path, sub); got != tc.served {
			t.Errorf("served(%s) = %v, want %v", path, got, tc.served)
		}
		tc := tc
		t.Run(tc.argv[0], func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // stops the world as often as it can
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						runtime.GC()
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			env := append([]string{"PWD=/somewhere"}, testEnv...)
			for i := 0; i < 40; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := Run(ctx, ProcSpec{Argv: tc.argv, Env: env, Dir: sub, DirServed: true})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if got := string(res.Stdout.Bytes()); got != tc.out || res.ExitCode != 0 {
					t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want %q", i, res.ExitCode, got, res.Stderr.Bytes(), tc.out)
				}
			}
		})
	}
}

func TestServed(t *testing.T) {
	dir := t.TempDir()
	other := "/proc" // never the file system of a file
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	elf, _ := os.Executable()
	hostShell := write("host-shell", "#!/bin/sh -e\necho\n")
	local := write("local-interp", "#!/bin/sh\n")
	chain := write("chain", "#! "+local+" arg\n")
	loop := write("loop", "#!"+filepath.Join(dir, "loop")+"\n")
	noNewline := write("no-newline", "#!"+strings.Repeat("x", 300))
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{elf, other, false},
		{elf, filepath.Dir(elf), true},
		{hostShell, other, false},
		{hostShell, dir, true},
		{chain, other, false},
		{"relative/prog", other, true},
		{filepath.Join(dir, "missing"), other, true},
		{"/bin/sh", "/no/such/dir", true},
		{loop, other, true}, // more #! levels than the kernel follows
		{noNewline, other, true},
	} {
		if got := served(tc.path, tc.dir); got != tc.want {
			t.Errorf("served(%s, %s) = %v, want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}

// startIn changes the working directory of its own thread only.
func TestStartInKeepsProcessDir(t *testing.T) {
	before, _ := os.Getwd()
	dir := "/proc" // on no file system a program is on: startIn is used
	if served("/bin/pwd", dir) {
		t.Fatal("/bin/pwd is on /proc's file system")
	}
	for i := 0; i < 5; i++ {
		res, err := Run(context.Background(), ProcSpec{Argv: []string{"/bin/pwd", "-P"}, Env: testEnv, Dir: dir, DirServed: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(res.Stdout.Bytes())); got != dir {
			t.Errorf("pwd %q, want %q", got, dir)
		}
	}
	if after, _ := os.Getwd(); after != before {
		t.Errorf("process cwd changed from %s to %s", before, after)
	}
}

// Where a thread cannot have a working directory of its own (a seccomp
// filter that refuses unshare), the command goes through the shell.
func TestStartInFallsBackToTheShell(t *testing.T) {
	old := unshareFS
	calls := 0
	unshareFS = func() error { calls++; return syscall.EPERM }
	defer func() { unshareFS = old }()
	dir := "/proc" // on no file system a program is on: startIn is tried
	res, err := Run(context.Background(), ProcSpec{Argv: []string{"/bin/sh", "-c", `echo "$0 $(pwd -P)"`, "zero"}, Env: testEnv, Dir: dir, DirServed: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout.Bytes()); got != "zero /proc\n" || res.ExitCode != 0 || calls != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q, unshare tried %d times", res.ExitCode, got, res.Stderr.Bytes(), calls)
	}
}
