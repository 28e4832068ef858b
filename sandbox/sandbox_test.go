package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// testSpec is a sandbox over a fresh workspace running script with sh.
func testSpec(t *testing.T, script string) Spec {
	t.Helper()
	run := t.TempDir()
	ws := filepath.Join(run, "ws")
	root := filepath.Join(run, "view")
	for _, d := range []string{ws, root} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	home, _ := os.UserHomeDir()
	return Spec{
		Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home},
		Dir: DefaultWorkspace, Root: root, Workspace: ws, WorkspaceAt: DefaultWorkspace,
		Home: home, HostHome: home, UID: os.Getuid(), GID: os.Getgid(), User: "root", Group: "root",
		GitName: "avfs", GitEmail: "avfs@localhost", TmpSize: 64 << 20, KillGrace: time.Second,
	}
}

func runSpec(t *testing.T, spec Spec) (string, string, Result, *Process) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(exe, spec)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	p.Cmd.Stdout, p.Cmd.Stderr = &out, &errb
	if err := p.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	_ = p.Cmd.Wait()
	return out.String(), errb.String(), p.Result(), p
}

func TestSmoke(t *testing.T) {
	spec := testSpec(t, `echo hi > /workspace/a; id; pwd; ls /; cat /etc/passwd; ls /dev; echo $$; ls /proc | head -3; cat /proc/self/status | grep Cap; touch /usr/x; touch /etc/y; sleep 100 & echo bg`)
	out, errs, res, p := runSpec(t, spec)
	t.Logf("out:\n%s\nerr:\n%s\nres %+v landlock %d", out, errs, res, p.Landlock)
	b, _ := os.ReadFile(filepath.Join(spec.Workspace, "a"))
	if strings.TrimSpace(string(b)) != "hi" {
		t.Fatalf("workspace: %q", b)
	}
	_ = wire.NetworkHost
}

func TestTimingScratch(t *testing.T) {
	spec := testSpec(t, `true`)
	spec.Argv = []string{"/bin/true"}
	exe, _ := os.Executable()
	for range 10 {
		t0 := time.Now()
		p, _ := New(exe, spec)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		p.Cmd.Wait()
		t2 := time.Now()
		p.Result()
		t.Logf("ready %v end %v", t1.Sub(t0), t2.Sub(t1))
	}
}
