package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"avfs/mount"
)

// GuardDelay is how long a command runs in a FUSE mount before avfs starts
// its guard. A run that ends sooner never pays for one; a longer one is
// cleaned up by the guard if avfs is killed.
const GuardDelay = 50 * time.Millisecond

// guardDone is what avfs writes to its guard when the run ended normally.
const guardDone = "done\n"

// guard is a helper process (`avfs proxy guard`) that outlives a killed
// avfs: the mount is served by avfs itself, so when avfs dies the mount goes
// dead, and the guard then ends the run's processes still inside it,
// detaches the mount and removes the run's directory. It learns of avfs's
// death by the end of its stdin pipe, which the kernel closes with avfs.
type guard struct {
	exe, base string

	mu      sync.Mutex
	timer   *time.Timer
	cmd     *exec.Cmd
	ctl     io.WriteCloser
	stopped bool
}

// startGuard schedules the guard of the run in base; stop cancels it.
func startGuard(exe, base string) *guard {
	g := &guard{exe: exe, base: base}
	g.timer = time.AfterFunc(GuardDelay, g.spawn)
	return g
}

func (g *guard) spawn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	if g.exe == "" {
		return // no guard: the next run cleans up instead
	}
	cmd := exec.Command(g.exe, "proxy", "guard", g.base)
	// Its own process group keeps a terminal's Ctrl-C from it; it stays in
	// avfs's session, so the command's process tracking leaves it alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ctl, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		ctl.Close()
		return
	}
	g.cmd, g.ctl = cmd, ctl
}

// stop tells the guard the run ended normally and waits for it to go.
func (g *guard) stop() {
	g.timer.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.cmd == nil {
		return
	}
	_, _ = io.WriteString(g.ctl, guardDone)
	g.ctl.Close()
	_ = g.cmd.Wait()
	g.cmd = nil
}

// Guard is `avfs proxy guard BASE`: it waits until ctl (its stdin, the
// other end held by the avfs of the run in BASE) ends. Without a done line
// first, that avfs died: Guard ends what still uses the run's mount, detaches
// it and removes BASE. ctx ending (the guard itself is told to stop) ends
// the wait without cleaning up: the run's avfs may still be alive.
func Guard(ctx context.Context, ctl io.Reader, base string) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(ctl).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != guardDone {
			cleanRun(base)
		}
	case <-ctx.Done():
	}
}

// cleanRun removes the directory of a run whose avfs is gone: the processes
// that still use its mount or copy, a dead mount, the directory itself,
// and what the run left at its --mountpoint (see mountpointFile).
func cleanRun(dir string) {
	root := filepath.Join(dir, "root")
	var mp mountpointRecord
	if b, err := os.ReadFile(filepath.Join(dir, mountpointFile)); err == nil && json.Unmarshal(b, &mp) == nil && filepath.IsAbs(mp.Dir) {
		root = mp.Dir
	}
	mount.KillHolders(root, 2*time.Second) // before a dead mount is detached, while their paths still show where they are
	_ = mount.CleanStale(root)
	if mount.IsMounted(root) {
		if mount.Unmount(root, false) != nil {
			_ = mount.Unmount(root, true)
		}
	}
	if mount.IsMounted(root) {
		return
	}
	if mp.Dir != "" {
		w := &workspace{dir: mp.Dir, base: dir, made: mp.Made, kept: fs.FileMode(mp.Kept)}
		if mp.Materialized {
			w.mode = "materialized"
		}
		_ = w.removeCopy()
	}
	os.RemoveAll(dir)
}

// mountpointFile, in a run's directory, records the --mountpoint the run
// uses, for whoever cleans up after a killed avfs.
const mountpointFile = "mountpoint.json"

type mountpointRecord struct {
	Dir          string `json:"dir"`
	Materialized bool   `json:"materialized"`
	Made         bool   `json:"made"`
	Kept         uint32 `json:"kept"`
}
