package mount

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"avfs/vault"
)

// The mount is served by a child process (this test binary in server mode),
// as avfs does, so that tests may start programs inside it without the
// deadlocks go-fuse documents for a process that serves its own mount.
func TestMain(m *testing.M) {
	if os.Getenv("AVFS_MOUNT_SERVE") == "1" {
		serveChild()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveChild() {
	ctx := context.Background()
	if lim := os.Getenv("AVFS_MOUNT_MEMLIMIT"); lim != "" {
		fmt.Sscan(lim, &memLimit)
	}
	if p := os.Getenv("AVFS_MOUNT_CPUPROFILE"); p != "" { // for profiling the server by hand
		f, err := os.Create(p)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	// Catch SIGTERM before the ready line: a test may stop the server at once.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	v, err := vault.Open(ctx, os.Getenv("AVFS_VAULT_PATH"), vault.Options{Actor: "mount"})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	// AVFS_MOUNT_DEBUG_LOG: every FUSE request, logged to that file.
	debug := false
	if p := os.Getenv("AVFS_MOUNT_DEBUG_LOG"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		defer f.Close()
		log.SetOutput(f)
		debug = true
	}
	var spillLimit int64
	if lim := os.Getenv("AVFS_MOUNT_SPILL_LIMIT"); lim != "" {
		fmt.Sscan(lim, &spillLimit)
	}
	sess, err := Mount(ctx, v, os.Getenv("AVFS_MOUNT_DIR"), Options{ReadOnly: os.Getenv("AVFS_MOUNT_RO") == "1", FsName: "avfs:test", Debug: debug,
		AllowOther: os.Getenv("AVFS_MOUNT_ALLOW_OTHER") == "1", SpillDir: os.Getenv("AVFS_MOUNT_SPILL_DIR"), SpillLimit: spillLimit})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(4)
	}
	fmt.Println("ready")
	select {
	case <-sig:
		if err := sess.Unmount(true); err != nil {
			fmt.Fprintln(os.Stderr, "unmount:", err)
		}
	case <-sess.Done():
	}
	v.Close()
}

// requireFUSE skips without FUSE, except in CI, where it fails.
func requireFUSE(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE is required in CI: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
}

// served is a vault mounted by a child process.
type served struct {
	t     *testing.T
	store *vault.Store
	v     *vault.Vault
	dir   string
	cmd   *exec.Cmd
	env   []string
}

func serve(t *testing.T, readonly bool, env ...string) *served {
	t.Helper()
	return serveIn(t, t.TempDir(), readonly, env...)
}

// serveIn is serve with the vault in home.
func serveIn(t *testing.T, home string, readonly bool, env ...string) *served {
	t.Helper()
	requireFUSE(t)
	st := vault.NewStore(home, vault.Options{Actor: "test"})
	v, err := st.Create(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{t: t, store: st, v: v, dir: filepath.Join(t.TempDir(), "mnt")}
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.env = env
	s.start(readonly)
	t.Cleanup(func() {
		s.stop()
		v.Close()
	})
	return s
}

func (s *served) start(readonly bool) {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	ro := "0"
	if readonly {
		ro = "1"
	}
	cmd.Env = append(os.Environ(), "AVFS_MOUNT_SERVE=1", "AVFS_VAULT_PATH="+s.v.Path(), "AVFS_MOUNT_DIR="+s.dir, "AVFS_MOUNT_RO="+ro)
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		s.t.Fatalf("mount server: %q", line)
	}
	s.cmd = cmd
}

// stop unmounts (SIGTERM to the server) and waits for it.
func (s *served) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-done
		s.t.Errorf("mount server did not stop")
	}
	s.cmd = nil
}

func (s *served) path(p string) string { return filepath.Join(s.dir, p) }

func (s *served) mustCheck() {
	s.t.Helper()
	rep, err := s.v.Check(context.Background())
	if err != nil || !rep.OK {
		s.t.Fatalf("vault check: %+v %v", rep.Problems, err)
	}
}

func mkdir(p string) error { return os.Mkdir(p, 0o755) }
