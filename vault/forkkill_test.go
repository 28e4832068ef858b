package vault

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// childFork forks AVFS_FORK_SRC into AVFS_FORK_DST in the store at
// AVFS_STORE_DIR. At the phase AVFS_FORK_STOP it prints "at PHASE" and
// waits for a line on stdin (or to be killed) before it goes on.
func childFork() {
	stop := os.Getenv("AVFS_FORK_STOP")
	in := bufio.NewReader(os.Stdin)
	forkPhase = func(name string) {
		if name == stop {
			fmt.Printf("at %s\n", name)
			_, _ = in.ReadString('\n')
		}
	}
	s := NewStore(os.Getenv("AVFS_STORE_DIR"), Options{Actor: "child"})
	if _, err := s.ForkInfo(context.Background(), os.Getenv("AVFS_FORK_SRC"), os.Getenv("AVFS_FORK_DST")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	fmt.Println("done")
	os.Exit(0)
}

// forkChild is a fork running in another process, stopped at a phase.
type forkChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startFork starts a process forking src into dst and waits until it
// reaches the phase stop.
func startFork(t *testing.T, s *Store, src, dst, stop string) *forkChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "AVFS_VAULT_CHILD=fork", "AVFS_STORE_DIR="+s.Dir,
		"AVFS_FORK_SRC="+src, "AVFS_FORK_DST="+dst, "AVFS_FORK_STOP="+stop)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &forkChild{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { c.kill() })
	line, err := c.out.ReadString('\n')
	if line != "at "+stop+"\n" {
		c.kill()
		t.Fatalf("fork child did not stop at %q: %q %v", stop, line, err)
	}
	return c
}

// kill kills the child with SIGKILL and reaps it.
func (c *forkChild) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// resume lets the child finish its fork and waits for it.
func (c *forkChild) resume(t *testing.T) {
	t.Helper()
	if _, err := c.in.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	line, _ := c.out.ReadString('\n')
	if err := c.cmd.Wait(); err != nil || line != "done\n" {
		t.Fatalf("fork child: %q %v", line, err)
	}
}

// forkPhases are the phases of a fork, in order, and what a fork killed
// at the end of each leaves: its pin in the parent (pinned) and, once
// linked, a complete fork (done).
var forkPhases = []struct {
	name         string
	pinned, done bool
	inParentTxn  bool // stopped inside a read transaction on the parent
}{
	{name: "parent open"},
	{name: "pin", pinned: true},
	{name: "prepared", pinned: true},
	{name: "INSERT INTO main.state (", pinned: true, inParentTxn: true},
	{name: "INSERT INTO main.inodes ", pinned: true, inParentTxn: true},
	{name: "INSERT INTO main.dentrie", pinned: true, inParentTxn: true},
	{name: "audit+commit", pinned: true},
	{name: "wal+close", pinned: true},
	{name: "fsync", pinned: true},
	{name: "pin sync", pinned: true},
	{name: "link", pinned: true, done: true},
	{name: "parent close", pinned: true, done: true},
}

// forkTmps returns the fork temporary files (and side files) in the
// store's vaults directory whose fork is called name ("" for any).
func forkTmps(t *testing.T, s *Store, name string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Dir, "vaults"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") || strings.Contains(e.Name(), ".tmp-") {
			if name == "" || strings.HasPrefix(e.Name(), "."+name+".") {
				got = append(got, e.Name())
			}
		}
	}
	return got
}

// vaultUUIDOf returns the uuid of the store's vault name.
func vaultUUIDOf(t *testing.T, s *Store, name string) string {
	t.Helper()
	u, err := vaultUUID(context.Background(), s.PathOf(name))
	if err != nil || u == "" {
		t.Fatalf("uuid of %s: %q %v", name, u, err)
	}
	return u
}

// TestForkKilled kills a fork (SIGKILL, in another process) at the end of
// each of its phases and checks that the next gc of the parent releases
// the dead fork's pin and removes its files, frees what it pinned, keeps
// the pins of a completed fork and of a fork under way in another process
// at the same time, and that the parent can then be deleted with --force.
func TestForkKilled(t *testing.T) {
	for _, ph := range forkPhases {
		t.Run(ph.name, func(t *testing.T) {
			ctx := context.Background()
			s, v := newVault(t)
			big := randBytes(3 * ChunkSize)
			if _, err := v.WriteFile(ctx, "/big.bin", bytes.NewReader(big), WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			startFork(t, s, "t", "f", ph.name).kill()
			// The fork's own view of big.bin is all that may keep it now.
			write(t, v, "/big.bin", "small")
			// A fork under way in another process, stopped at the same
			// phase (or, where that phase holds a read transaction on the
			// parent that gc's checkpoint would wait for, after its pin).
			livePhase := ph.name
			if ph.inParentTxn {
				livePhase = "prepared"
			}
			live := startFork(t, s, "t", "live", livePhase)
			livePinned := livePhase != "parent open"
			// The user tries again under the same name.
			if !ph.done {
				f, err := s.Fork(ctx, "t", "f")
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			fUUID := vaultUUIDOf(t, s, "f")
			if _, err := v.Prune(ctx, PruneOptions{Keep: 1}); err != nil {
				t.Fatal(err)
			}

			dry, err := v.GCDryRun(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.GC(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if dry.Rows != res.Rows || dry.Chunks != res.Chunks || dry.BytesFreed != res.BytesFreed ||
				dry.ForksReleased != res.ForksReleased || dry.FilesRemoved != res.FilesRemoved {
				t.Errorf("gc's dry run said %+v, gc freed %+v", dry, res)
			}
			if want := int64(b2i(ph.pinned && !ph.done)); res.ForksReleased != want {
				t.Errorf("gc released %d pins, want %d", res.ForksReleased, want)
			}
			if ph.done {
				if res.BytesFreed != 0 {
					t.Errorf("gc freed %d bytes the complete fork borrows", res.BytesFreed)
				}
			} else if res.BytesFreed < int64(len(big)) {
				t.Errorf("gc freed %d bytes, want at least %d", res.BytesFreed, len(big))
			}
			info, err := v.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range info.Forks {
				names = append(names, f.Name)
				if f.Name == "f" && f.UUID != fUUID {
					t.Errorf("the dead fork's pin %s is left", f.UUID)
				}
			}
			slices.Sort(names)
			want := []string{"f"}
			if livePinned {
				want = []string{"f", "live"}
			}
			if !slices.Equal(names, want) {
				t.Errorf("pins of %v, want %v", names, want)
			}
			if got := forkTmps(t, s, "f"); len(got) != 0 {
				t.Errorf("the dead fork's files are left: %v", got)
			}
			if got := forkTmps(t, s, "live"); len(got) != 1 {
				t.Errorf("the live fork's temporary file: %v", got)
			}
			mustCheck(t, v)

			live.resume(t)
			lv, err := s.Open(ctx, "live")
			if err != nil {
				t.Fatal(err)
			}
			if got := read(t, lv, "/big.bin"); got != "small" {
				t.Errorf("live fork reads %q", got)
			}
			mustCheck(t, lv)
			lv.Close()
			if got := forkTmps(t, s, ""); len(got) != 0 {
				t.Errorf("files left: %v", got)
			}

			v.Close()
			if err := s.Delete(ctx, "t", true); err != nil {
				t.Fatalf("delete --force: %v", err)
			}
			f, err := s.Open(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			wantF := "small"
			if ph.done {
				wantF = string(big)
			}
			if got := read(t, f, "/big.bin"); got != wantF {
				t.Errorf("fork f reads %d bytes, want %d", len(got), len(wantF))
			}
			mustCheck(t, f)
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDeleteAfterKilledFork deletes the parent of a fork killed after its
// pin, without a gc in between: the dead fork neither refuses the delete
// nor, once its name is taken by a new fork, makes --force fail.
func TestDeleteAfterKilledFork(t *testing.T) {
	for _, tc := range []struct {
		name         string
		retry, force bool
	}{
		{name: "plain"},
		{name: "retried", retry: true, force: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, v := newVault(t)
			write(t, v, "/a", "a")
			startFork(t, s, "t", "f", "prepared").kill()
			if tc.retry {
				f, err := s.Fork(ctx, "t", "f")
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			v.Close()
			if err := s.Delete(ctx, "t", tc.force); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if got := forkTmps(t, s, ""); len(got) != 0 {
				t.Errorf("files left: %v", got)
			}
			if tc.retry {
				f, err := s.Open(ctx, "f")
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if got := read(t, f, "/a"); got != "a" {
					t.Errorf("fork reads %q", got)
				}
				if info, _ := f.Info(ctx); info.Parent != nil {
					t.Errorf("fork still has a parent: %+v", info.Parent)
				}
			}
		})
	}
}

// TestSweepForkTmps removes the files of ended forks only: exact names,
// regular files, not locked by a live fork.
func TestSweepForkTmps(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	const u = "0123abcd-0123-4567-89ab-0123456789ab"
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dead := []string{".a." + u + ".tmp", ".a." + u + ".tmp-wal", ".a." + u + ".tmp-shm", ".a." + u + ".tmp-journal",
		".b." + u + ".tmp-wal"} // a side file without its temporary file
	for _, n := range dead {
		touch(n)
	}
	kept := []string{".a." + u + ".tmp.x", "a." + u + ".tmp", ".a." + strings.ToUpper(u) + ".tmp", ".-a." + u + ".tmp",
		".a.0123abcd.tmp", ".a." + u + ".tmp-walx", "c.avfs", ".current.tmp"}
	for _, n := range kept {
		touch(n)
	}
	// A symlink named like a temporary file: neither it nor its target goes.
	if err := os.Symlink(outside, filepath.Join(dir, ".s."+u+".tmp")); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, ".s."+u+".tmp")
	// A fork under way (here, in this process) holds its file.
	_, tmp, lock, err := createForkTmp(dir, "live")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	touch(filepath.Base(tmp) + "-wal")
	kept = append(kept, filepath.Base(tmp), filepath.Base(tmp)+"-wal")

	n, err := sweepForkTmps(dir, true)
	if err != nil || n != 1 {
		t.Fatalf("sweep removed %d temporary files (%v), want 1", n, err)
	}
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(kept)
	if !slices.Equal(got, kept) {
		t.Errorf("left %v\nwant %v", got, kept)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Errorf("symlink target: %q %v", b, err)
	}
	// Once its process lets go, the fork's files go too.
	lock.Close()
	if n, err := sweepForkTmps(dir, true); err != nil || n != 1 {
		t.Fatalf("second sweep removed %d (%v), want 1", n, err)
	}
}
