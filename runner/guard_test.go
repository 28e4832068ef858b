package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A guard leaves the run alone when avfs says it is done, and cleans up
// when avfs's end of the pipe closes without it and the run's lock is
// free: the run's processes still in its copy end and the directory goes.
// While the lock is held (avfs is alive), it cleans nothing.
func TestGuard(t *testing.T) {
	defer func(d time.Duration) { guardLockWait = d }(guardLockWait)
	guardLockWait = 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		ctl    string
		locked bool // the run's avfs still holds the lock
		clean  bool
	}{
		{"done", guardDone, false, false},
		{"avfs died", "", false, true},
		{"avfs died mid-line", "do", false, true},
		{"pipe ended, avfs alive", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenRunDir(filepath.Join(t.TempDir(), "run"))
			if err != nil {
				t.Fatal(err)
			}
			run, err := d.NewRun()
			if err != nil {
				t.Fatal(err)
			}
			defer run.Remove()
			root := filepath.Join(run.Dir, "root")
			if err := os.Mkdir(root, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := run.writeRecord(mountpointRecord{Dir: root, Materialized: true}); err != nil {
				t.Fatal(err)
			}
			inside := startSleeper(t, root, "AVFS_MOUNTPOINT="+root)
			if !tc.locked {
				run.lock.Close() // as the kernel does when avfs dies
				run.lock = nil
			}

			Guard(context.Background(), strings.NewReader(tc.ctl), run.Dir)
			_, err = os.Stat(run.Dir)
			if gone := os.IsNotExist(err); gone != tc.clean {
				t.Fatalf("run directory gone: %v, want %v", gone, tc.clean)
			}
			if alive := inside.alive(); alive == tc.clean {
				t.Fatalf("the run's process alive: %v, want %v", alive, !tc.clean)
			}
		})
	}
}

// A guard acts only on a run directory: not on a directory in a root that
// others may enter (nor does it change that root's mode), not on a symlink
// to a run, not on a relative path or /.
func TestGuardNotARun(t *testing.T) {
	d, err := OpenRunDir(filepath.Join(t.TempDir(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.NewRun()
	if err != nil {
		t.Fatal(err)
	}
	defer run.Remove()
	run.lock.Close()
	run.lock = nil
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(shared, "exec-1-x")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(d.Path(), "exec-2-link")
	if err := os.Symlink(run.Dir, link); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{other, link, "exec-1-x", "/"} {
		Guard(context.Background(), strings.NewReader(""), base)
	}
	for _, p := range []string{other, run.Dir} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o755 {
		t.Fatalf("the guard changed the mode of %s: %v", shared, fi.Mode())
	}
}

// A cancelled guard (the guard itself told to stop) cleans nothing.
func TestGuardCancelled(t *testing.T) {
	base := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, w, _ := os.Pipe()
	defer w.Close()
	defer r.Close()
	Guard(ctx, r, base)
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("cancelled guard removed the run: %v", err)
	}
}

// proc is a process a test started, to see whether cleanup killed it.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startSleeper starts a long sleep with its working directory dir (entered
// after exec, so dir may be a mount this process serves) and env.
func startSleeper(t *testing.T, dir string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command("sh", "-c", `cd "$1" && exec sleep 60`, "sh", dir)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.exited })
	// Until sh has changed directory, cleanup could not find it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cwd"); cwd == dir {
			if exe, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); strings.HasSuffix(exe, "/sleep") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process did not get into %s", dir)
		}
	}
	return p
}

// alive reports whether p still runs. Cleanup returns only once what it
// killed holds nothing any more: a process it killed is then gone or a
// zombie.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
