package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"avfs/wire"
)

// withoutSysAdmin returns a's command line args run without
// CAP_SYS_ADMIN (setpriv drops it from the bounding and inheritable
// sets), as in a container given /dev/fuse but not the capability. It
// needs root and setpriv (util-linux, installed by `make deps`): without
// them the test skips, except in CI (CI=true), where it fails.
func (a *avfs) withoutSysAdmin(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "not root: dropping CAP_SYS_ADMIN changes nothing"
	case err != nil:
		why = "no setpriv (util-linux; `make deps` installs it)"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a run without CAP_SYS_ADMIN is required in CI: %s", why)
		}
		t.Skip(why)
	}
	cmd := a.command(args...)
	cmd.Path = setpriv
	cmd.Args = append([]string{setpriv, "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", avfsBin}, args...)
	return cmd
}

// proxyWithoutSysAdmin is a.proxy without CAP_SYS_ADMIN.
func (a *avfs) proxyWithoutSysAdmin(t *testing.T, flags []string, argv ...string) proxyRun {
	t.Helper()
	args := proxyArgs(flags, argv...)
	cmd := a.withoutSysAdmin(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return decodeProxyRun(t, args, exitCode(err), out.Bytes(), errb.Bytes())
}

// Where /dev/fuse opens but mounting is refused (no CAP_SYS_ADMIN), auto
// materialises the vault, runs, and says why in mount.fallback; fuse
// fails with fuse_unavailable saying so, prints nothing of fusermount's,
// and leaves no checkpoint.
func TestProxyMountRefused(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	a := newProxyAVFS(t)
	a.write("orig\n", "/f")

	r := a.proxyWithoutSysAdmin(t, nil, "sh", "-c", "echo changed > f")
	r.ok(t, wire.AllowWithCheckpoint)
	if m := r.env.Mount; m == nil || m.Mode != "materialized" || m.Fallback == nil || m.Fallback.Reason != wire.FallbackMountNotPermitted ||
		!strings.Contains(m.Fallback.Message, "not permitted") {
		t.Fatalf("auto without CAP_SYS_ADMIN: %s", r.raw)
	}
	equal(t, "f", a.cat("/f"), "changed\n")

	before := a.checkpointIDs()
	r = a.proxyWithoutSysAdmin(t, []string{"--mount-mode", "fuse"}, "sh", "-c", "echo again > f")
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeFuseUnavailable ||
		!strings.Contains(r.env.Error.Message, "not permitted") || !strings.Contains(r.env.Error.Message, "--mount-mode materialize") ||
		r.env.Process != nil || r.env.Checkpoint != nil {
		t.Fatalf("fuse without CAP_SYS_ADMIN: %s\nstderr %s", r.raw, r.stderr)
	}
	if strings.Contains(r.stderr, "fusermount") {
		t.Errorf("fusermount's complaint reached stderr: %q", r.stderr)
	}
	if after := a.checkpointIDs(); !slices.Equal(after, before) {
		t.Fatalf("checkpoints %v -> %v: a run that never started left one", before, after)
	}
	equal(t, "f", a.cat("/f"), "changed\n")
}
