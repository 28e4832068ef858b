package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"avfs/mount"
)

// startMount runs `avfs mount --json DIR` and waits for its ready document.
func (a *avfs) startMount(dir string, extra ...string) *exec.Cmd {
	a.t.Helper()
	if err := mount.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			a.t.Fatalf("FUSE is required in CI: %v", err)
		}
		a.t.Skipf("FUSE not available: %v", err)
	}
	cmd := exec.Command(avfsBin, append([]string{"--json", "mount", dir}, extra...)...)
	cmd.Env = append(os.Environ(), "AVFS_HOME="+a.home)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	dec := json.NewDecoder(bufio.NewReader(out))
	var ready map[string]any
	if err := dec.Decode(&ready); err != nil || ready["kind"] != "mount_ready" {
		cmd.Process.Kill()
		cmd.Wait()
		a.t.Fatalf("mount ready document: %v %v", ready, err)
	}
	if !mount.IsMounted(dir) {
		a.t.Fatal("ready before the directory is mounted")
	}
	a.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	})
	return cmd
}

func TestMountUnmountCommands(t *testing.T) {
	a := newAVFS(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(dir, 0o755)
	cmd := a.startMount(dir)
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("through the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second writer mount of the same vault is refused.
	other := filepath.Join(t.TempDir(), "other")
	os.Mkdir(other, 0o755)
	a.fail(1, "vault_busy", "mount", other)
	// A restore while mounted is refused.
	a.ok("checkpoint", "save", "c")
	a.fail(1, "vault_busy", "checkpoint", "restore", "c")
	// So is a change of the tree from another process: the kernel's caches
	// of the mount would not know of it. Reads go on.
	doc := a.fail(1, "vault_busy", "mkdir", "/from-cli")
	if !strings.Contains(doc["message"].(string), "change it through the mount") {
		t.Fatalf("busy message: %v", doc)
	}
	a.fail(1, "vault_busy", "rm", "/hello.txt")
	// Deleting the vault under its mount is refused, --force or not.
	a.fail(1, "vault_busy", "vault", "delete", "default", "--yes")
	a.fail(1, "vault_busy", "vault", "delete", "default", "--force", "--yes")
	if got := a.cat("/hello.txt"); got != "through the mount" {
		t.Fatalf("cat while mounted: %q", got)
	}
	// Busy unmount names the holder; --lazy detaches.
	sleeper := exec.Command("sleep", "20")
	sleeper.Dir = dir
	sleeper.Start()
	time.Sleep(100 * time.Millisecond)
	doc = a.fail(1, "mount_busy", "unmount", dir)
	if !strings.Contains(doc["message"].(string), "sleep") {
		t.Fatalf("busy message: %v", doc)
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	a.ok("unmount", dir)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("avfs mount exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("avfs mount did not exit after unmount")
	}
	equal(t, "content", a.cat("/hello.txt"), "through the mount")
	a.fail(1, "not_mounted", "unmount", dir)
	a.ok("vault", "check")
}

func TestMountSignalAndKill(t *testing.T) {
	a := newAVFS(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(dir, 0o755)
	// SIGTERM unmounts cleanly.
	cmd := a.startMount(dir)
	os.WriteFile(filepath.Join(dir, "a"), []byte("1"), 0o644)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if mount.IsMounted(dir) {
		t.Fatal("still mounted after SIGTERM")
	}
	// kill -9 leaves a stale mount; the next mount cleans it up.
	cmd = a.startMount(dir)
	os.WriteFile(filepath.Join(dir, "b"), []byte("2"), 0o644)
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("expected a dead mount after kill -9")
	}
	cmd = a.startMount(dir)
	if b, err := os.ReadFile(filepath.Join(dir, "b")); err != nil || string(b) != "2" {
		t.Fatalf("after remount: %q %v", b, err)
	}
	a.ok("unmount", dir)
	cmd.Wait()
	a.ok("vault", "check")
	// Read-only mount.
	cmd = a.startMount(dir, "--readonly")
	if err := os.WriteFile(filepath.Join(dir, "c"), []byte("3"), 0o644); err == nil {
		t.Fatal("write on a read-only mount")
	}
	a.ok("unmount", dir)
	cmd.Wait()
}

// TestUnmountRefusesOtherMounts checks that `avfs unmount` leaves alone
// what is not an avfs mount, a tmpfs that calls itself avfs included.
func TestUnmountRefusesOtherMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	a := newAVFS(t)
	cases := []struct {
		name, source string // source "" for a plain directory
	}{
		{"plain directory", ""},
		{"tmpfs", "tmpfs"},
		{"tmpfs whose source claims avfs", "avfs:default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.source != "" {
				if err := syscall.Mount(tc.source, dir, "tmpfs", 0, "size=1m"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
			}
			for _, lazy := range [][]string{nil, {"--lazy"}} {
				a.fail(1, "not_mounted", append([]string{"unmount", dir}, lazy...)...)
				equal(t, "still mounted", mount.IsMounted(dir), tc.source != "")
			}
		})
	}
}

// mount makes a missing DIR and removes it once unmounted; a DIR that was
// there stays.
func TestMountCreatesMissingDir(t *testing.T) {
	a := newAVFS(t)
	for _, existed := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "mnt")
		if existed {
			os.Mkdir(dir, 0o755)
		}
		cmd := a.startMount(dir)
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		a.ok("unmount", dir)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("avfs mount exited with %v", err)
		}
		_, err := os.Stat(dir)
		if existed && err != nil {
			t.Errorf("the existing %s was removed: %v", dir, err)
		}
		if !existed && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the %s mount made is still there: %v", dir, err)
		}
	}
	if got := a.cat("/f.txt"); got != "x" {
		t.Errorf("written through the mount: %q", got)
	}
	// A missing parent is an error, and nothing is made.
	a.fail(1, "invalid_input", "mount", filepath.Join(t.TempDir(), "no", "such"))
}

// TestMountSIGTERMAfterWrite: `avfs mount` exits after SIGTERM only once
// what was written is in the vault and the vault is closed: the content
// reads back whole, `vault check` passes, and the server released the
// mount lock itself (its unlock is audited after the file's commit), so
// the next mount takes no stale lock over. A file still open for writing
// keeps the mount, detached, until it is closed, and what is written to
// it meanwhile is committed too.
func TestMountSIGTERMAfterWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keepOpen bool // the file is still open for writing at SIGTERM
	}{
		{"file closed", false},
		{"file open for writing", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAVFS(t)
			dir := filepath.Join(t.TempDir(), "mnt")
			os.Mkdir(dir, 0o755)
			cmd := a.startMount(dir)
			content := make([]byte, 3<<20+17) // several chunks, the last one partial
			rand.Read(content)
			half := len(content) / 2
			f, err := os.Create(filepath.Join(dir, "big"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(content[:half]); err != nil {
				t.Fatal(err)
			}
			if !tc.keepOpen {
				if _, err := f.Write(content[half:]); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			exited := make(chan error, 1)
			cmd.Process.Signal(syscall.SIGTERM)
			go func() { exited <- cmd.Wait() }()
			if tc.keepOpen {
				// The server detaches the busy mount and serves on.
				deadline := time.Now().Add(10 * time.Second)
				for mount.IsMounted(dir) {
					if time.Now().After(deadline) {
						t.Fatal("the busy mount was not detached after SIGTERM")
					}
					time.Sleep(5 * time.Millisecond)
				}
				select {
				case err := <-exited:
					t.Fatalf("avfs mount exited (%v) while a file was open for writing", err)
				default:
				}
				if _, err := f.Write(content[half:]); err != nil {
					t.Fatalf("write to the detached mount: %v", err)
				}
				if err := f.Close(); err != nil {
					t.Fatalf("close on the detached mount: %v", err)
				}
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("avfs mount exited with %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("avfs mount did not exit after SIGTERM")
			}
			if mount.IsMounted(dir) {
				t.Fatal("still mounted after the server exited")
			}
			if got := a.cat("/big"); got != string(content) {
				t.Fatalf("/big holds %d bytes after the unmount, want the %d written", len(got), len(content))
			}
			a.ok("vault", "check")
			var audit struct {
				Entries []struct {
					ID      int64          `json:"id"`
					Op      string         `json:"op"`
					Path    string         `json:"path"`
					Details map[string]any `json:"details"`
				} `json:"entries"`
			}
			a.into(&audit, "audit")
			var lastBig, unlock int64
			for _, e := range audit.Entries {
				switch {
				case e.Path == "/big":
					lastBig = e.ID
				case e.Op == "unlock" && e.Details["lock"] == "mount":
					unlock = e.ID
				}
			}
			if lastBig == 0 || unlock <= lastBig {
				t.Fatalf("audit: last change of /big %d, the mount's unlock %d: want the unlock after the commit", lastBig, unlock)
			}
		})
	}
}
