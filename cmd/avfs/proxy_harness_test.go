package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/mount"
)

// TestProxyHarnessExample runs docs/examples/harness.py against the built
// binary, non-interactively, down every decision path.
func TestProxyHarnessExample(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	// The interpreter itself, not a wrapper such as a pyenv shim (slow to start).
	if out, err := exec.Command(python, "-c", "import sys; print(sys.executable)").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		python = strings.TrimSpace(string(out))
	}
	harness, err := filepath.Abs(filepath.Join("..", "..", "docs", "examples", "harness.py"))
	if err != nil {
		t.Fatal(err)
	}
	a := newProxyAVFS(t)
	// The extension that sends touch for approval, from $AVFS_HOME/policy.
	writeApprovalBundle(t, filepath.Join(a.home, "policy"))
	a.write("orig\n", "/f")

	// avfs on the PATH, as a harness would find it.
	bin := t.TempDir()
	if err := os.Symlink(avfsBin, filepath.Join(bin, "avfs")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		cmd := a.command()
		cmd.Path, cmd.Args = python, append([]string{python, harness, "--timeout", "10s"}, args...)
		cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb // stdin: /dev/null, not a TTY
		err := cmd.Run()
		return exitCode(err), out.String(), errb.String()
	}
	expect := func(what string, code int, stdout string, stderrHas []string, args ...string) {
		t.Helper()
		c, out, errs := run(args...)
		if c != code || out != stdout {
			t.Fatalf("%s: exit %d stdout %q, want exit %d stdout %q\nstderr:\n%s", what, c, out, code, stdout, errs)
		}
		for _, s := range stderrHas {
			if !strings.Contains(errs, s) {
				t.Fatalf("%s: stderr lacks %q:\n%s", what, s, errs)
			}
		}
	}

	var modes []string
	for _, mode := range proxyModes {
		if mode == "fuse" {
			if err := mount.Available(); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("FUSE is required in CI: %v", err)
				}
				t.Logf("FUSE not available, materialize only: %v", err)
				continue
			}
		}
		modes = append(modes, mode)
		m := []string{"--mount-mode", mode}
		expect("allow", 0, "orig\n", []string{"decision allow (avfs.allow.read_only)", "exit 0, 0 change(s)"}, append(m, "--", "cat", "f")...)

		// allow_with_checkpoint: undone with --rollback, kept otherwise.
		expect("rollback", 0, "", []string{"decision allow_with_checkpoint", "modified file /f (5 -> 8 bytes, mode 0644 -> 0755)", "restored checkpoint"},
			append(m, "--rollback", "--", "sh", "-c", "echo changed > f; chmod 755 f")...)
		equal(t, "f after --rollback", a.cat("/f"), "orig\n")
		expect("keep", 0, "", []string{"Undo these changes", "-> no (not interactive)"}, append(m, "--", "sh", "-c", "echo kept > g")...)
		equal(t, "g kept", a.cat("/g"), "kept\n")

		expect("deny", 126, "", []string{"denied by the policy", "avfs.deny.privileged"}, append(m, "--", "sudo", "ls")...)

		// require_approval: granted and run, denied, or declined when nobody can be asked.
		expect("approve", 0, "", []string{"approval needed", "granted ap-", "added file /" + mode + ".txt (0 bytes)"},
			append(m, "--auto-approve", "--", "touch", mode+".txt")...)
		expect("deny approval", 126, "", []string{"denied ap-"}, append(m, "--auto-deny", "--", "touch", "no.txt")...)
		expect("nobody to ask", 126, "", []string{"-> no (not interactive)", "denied ap-"}, append(m, "--", "touch", "no.txt")...)

		expect("exit status", 3, "out\n", []string{"exit 3"}, append(m, "--", "sh", "-c", "echo out; exit 3")...)
		expect("not found", 127, "", []string{"program not found"}, append(m, "--", "no-such-program-avfs")...)
		expect("timeout", 124, "", []string{"timed out"}, append(m, "--timeout", "300ms", "--", "sleep", marker())...)
		expect("binary output", 0, "\xff\x00\n", nil, append(m, "--", "printf", `\377\000\n`)...)
	}
	expect("avfs failed", 125, "", []string{"not run: invalid_input"}, "--mount-mode", "bogus", "--", "ls")
	expect("avfs usage error", 125, "", []string{"avfs failed (exit 2): usage"}, "--timeout", "soon", "--", "ls")

	var list approvalListDoc
	a.into(&list, "approval", "list")
	statuses := map[string]int{}
	for _, ap := range list.Approvals {
		statuses[ap.Status]++
	}
	if statuses["used"] != len(modes) || statuses["denied"] != 2*len(modes) || len(list.Approvals) != 3*len(modes) {
		t.Fatalf("approvals: %v", statuses)
	}
	want := []string{"f", "g"}
	for _, mode := range modes {
		want = append(want, mode+".txt")
	}
	slices.Sort(want)
	equalSlice(t, "files", a.ls("/"), want)
}
