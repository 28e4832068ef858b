package main

// End-to-end tests of `avfs proxy exec` and `avfs approval` with the built
// binary. Every test has its own AVFS_HOME and TMPDIR; at the end of each
// test nothing of avfs may be left: no run directory in $AVFS_HOME/run, no
// mount and no process under it or TMPDIR (see newProxyAVFS).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"avfs/engine"
	"avfs/mount"
	"avfs/wire"
)

// proxyModes are the ways proxy exec presents the vault to the command.
var proxyModes = []string{"fuse", "materialize"}

// requireFUSE skips the test when FUSE cannot be used, except in CI
// (CI=true), where FUSE tests must run.
func requireFUSE(t *testing.T) {
	t.Helper()
	if err := mount.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE is required in CI: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
}

// eachMode runs f as a subtest per mount mode.
func eachMode(t *testing.T, f func(t *testing.T, mode string)) {
	t.Helper()
	for _, mode := range proxyModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			if mode == "fuse" {
				requireFUSE(t)
			}
			f(t, mode)
		})
	}
}

// reportedMode is the envelope's mount.mode for a --mount-mode.
func reportedMode(mode string) string {
	if mode == "materialize" {
		return "materialized"
	}
	return mode
}

// newProxyAVFS is newAVFS with a private TMPDIR, checked when the test
// ends with its run root (where proxy exec puts its mount points and
// copies).
func newProxyAVFS(t *testing.T) *avfs {
	t.Helper()
	a := newAVFS(t)
	tmp := t.TempDir()
	a.env = append(a.env, "TMPDIR="+tmp)
	t.Cleanup(func() { checkNothingLeft(t, tmp); checkNothingLeft(t, a.runDir()) })
	return a
}

// runDir is the run root of a: where each run has its directory.
func (a *avfs) runDir() string { return filepath.Join(a.home, "run") }

// runDirs lists the run directories in the run root of a (not the
// kernel's remembered answer to the sandbox probe, which stays there).
func (a *avfs) runDirs() []string {
	ents, _ := os.ReadDir(a.runDir())
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "exec-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// tmpDir is the TMPDIR of a.
func (a *avfs) tmpDir() string {
	for _, kv := range a.env {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			return v
		}
	}
	a.t.Fatal("no TMPDIR: use newProxyAVFS")
	return ""
}

// with returns a copy of a that adds env to every run.
func (a *avfs) with(env ...string) *avfs {
	b := *a
	b.env = append(slices.Clone(a.env), env...)
	return &b
}

// on returns a copy of a that reports to t (for subtests).
func (a *avfs) on(t *testing.T) *avfs {
	b := *a
	b.t = t
	return &b
}

// command is the avfs command line args as a.exec would run it, not started.
func (a *avfs) command(args ...string) *exec.Cmd {
	cmd := exec.Command(avfsBin, args...)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "AVFS_HOME="+a.home), a.env...)
	return cmd
}

// checkNothingLeft fails the test if avfs left anything under tmp: a
// directory of a run, a mount, or a process (a guard names its run's
// directory on its command line; a command runs in it).
func checkNothingLeft(t *testing.T, tmp string) {
	t.Helper()
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "avfs-exec-") || strings.HasPrefix(e.Name(), "exec-") {
			t.Errorf("left in %s: %s", tmp, e.Name())
		}
	}
	// Processes that were killed may take a moment to leave /proc.
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = processesUsing(tmp)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("processes left: %q", left)
		mount.KillHolders(tmp, time.Second) // do not leave them to the next tests
		for _, p := range left {
			pid, _, _ := strings.Cut(p, " ")
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	}
	if m := mountsUnder(tmp); len(m) > 0 {
		t.Errorf("mounts left: %q", m)
		for _, dir := range m {
			mount.Unmount(dir, true)
		}
	}
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// processesUsing lists the live processes (not zombies) whose command line
// mentions s or whose working directory is under s.
func processesUsing(s string) []string {
	procs, _ := os.ReadDir("/proc")
	var out []string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		line := strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		cwd, _ := os.Readlink(filepath.Join("/proc", p.Name(), "cwd"))
		if line != "" && (strings.Contains(line, s) || strings.HasPrefix(cwd, s)) {
			out = append(out, fmt.Sprintf("%d %s (in %s)", pid, line, cwd))
		}
	}
	return out
}

// sleeping lists the processes that run `sleep MARKER` (see marker).
func sleeping(marker string) []int {
	return processes(func(cmdline string) bool { return cmdline == "sleep\x00"+marker+"\x00" })
}

// processes lists the processes whose NUL-separated command line matches.
func processes(match func(cmdline string) bool) []int {
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if match(string(cmdline)) {
			out = append(out, pid)
		}
	}
	return out
}

// guarding lists the guards (`avfs proxy guard DIR`) of runs under tmp.
func guarding(tmp string) []int {
	return processes(func(cmdline string) bool {
		_, dir, ok := strings.Cut(cmdline, "\x00proxy\x00guard\x00")
		return ok && strings.HasPrefix(dir, tmp+"/")
	})
}

// markerSeq makes unique markers for the processes of a test.
var markerSeq atomic.Int64

// marker returns a number no other process mentions: `sleep MARKER` is a
// long sleep that can be found by its command line.
func marker() string {
	return fmt.Sprintf("9%05d%03d", os.Getpid()%100000, markerSeq.Add(1)%1000)
}

// proxyRun is one `avfs --json proxy exec`.
type proxyRun struct {
	args   []string
	code   int
	env    wire.Envelope
	doc    map[string]any // the same envelope, as a JSON object
	raw    []byte
	stderr string
}

// workspace is where the run's command saw the vault: /workspace in a
// sandbox, the mount's host directory without one.
func (r proxyRun) workspace() string {
	if r.env.Sandbox != nil && r.env.Sandbox.Mode == wire.SandboxNamespaces {
		return r.env.Sandbox.Workspace
	}
	return r.env.Mount.Dir
}

// proxyArgs is the command line of `avfs --json proxy exec FLAGS -- ARGV`,
// with short default timeouts (later flags win).
func proxyArgs(flags []string, argv ...string) []string {
	args := append([]string{"--json", "proxy", "exec", "--timeout", "20s", "--kill-grace", "300ms"}, flags...)
	return append(append(args, "--"), argv...)
}

// proxy runs `avfs --json proxy exec FLAGS -- ARGV` and checks its envelope
// (see checkEnvelope).
func (a *avfs) proxy(flags []string, argv ...string) proxyRun {
	a.t.Helper()
	args := proxyArgs(flags, argv...)
	r := a.exec(nil, args...)
	return decodeProxyRun(a.t, args, r.code, r.stdout, r.stderr)
}

// decodeProxyRun parses the one JSON document on stdout into the envelope
// and checks it.
func decodeProxyRun(t *testing.T, args []string, code int, stdout, stderr []byte) proxyRun {
	t.Helper()
	r := proxyRun{args: args, code: code, stderr: string(stderr)}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("avfs %q: exit %d, stdout is not a JSON document (%v): %.2000q stderr %q", args, code, err, stdout, stderr)
	}
	if err := dec.Decode(new(json.RawMessage)); err != io.EOF {
		t.Fatalf("avfs %q: more than one JSON document on stdout: %.2000q", args, stdout)
	}
	r.raw = raw
	if err := json.Unmarshal(raw, &r.doc); err != nil {
		t.Fatalf("avfs %q: %v", args, err)
	}
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&r.env); err != nil {
		t.Fatalf("avfs %q: the envelope does not decode into wire.Envelope: %v\n%s", args, err, raw)
	}
	checkEnvelope(t, r)
	return r
}

// checkEnvelope checks what every envelope must be: every key present with
// its type, and an exit status that agrees with it.
func checkEnvelope(t *testing.T, r proxyRun) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("avfs %q: %s\n%s", r.args, fmt.Sprintf(format, args...), r.raw)
	}
	d := r.doc
	type want struct {
		key      string
		kind     string // number, string, array, object, object|null
		nullable bool
	}
	check := func(where string, m map[string]any, keys []want) {
		t.Helper()
		for _, k := range keys {
			v, ok := m[k.key]
			if !ok {
				fail("%s%s is missing", where, k.key)
			}
			if v == nil {
				if !k.nullable {
					fail("%s%s is null", where, k.key)
				}
				continue
			}
			var got string
			switch v.(type) {
			case float64:
				got = "number"
			case string:
				got = "string"
			case []any:
				got = "array"
			case map[string]any:
				got = "object"
			case bool:
				got = "bool"
			}
			if got != k.kind {
				fail("%s%s is a %s, want a %s", where, k.key, got, k.kind)
			}
		}
	}
	check("", d, []want{
		{"schema_version", "number", false}, {"kind", "string", false}, {"id", "string", false}, {"vault", "string", false},
		{"decision", "string", false}, {"decision_id", "string", false}, {"policy", "object", false}, {"command", "object", false},
		{"checkpoint", "object", true}, {"approval", "object", true}, {"mount", "object", true}, {"process", "object", true},
		{"changes", "array", false}, {"rollback", "object", true}, {"effects", "object", true}, {"timing", "object", false}, {"error", "object", true},
	})
	check("policy.", d["policy"].(map[string]any), []want{{"reasons", "array", false}, {"bundles", "array", false}, {"eval_us", "number", false}})
	check("command.", d["command"].(map[string]any), []want{{"argv", "array", false}, {"cwd", "string", false}})
	check("timing.", d["timing"].(map[string]any), []want{
		{"policy_ms", "number", false}, {"checkpoint_ms", "number", false}, {"mount_ms", "number", false},
		{"run_ms", "number", false}, {"summary_ms", "number", false}, {"total_ms", "number", false},
	})
	if p, ok := d["process"].(map[string]any); ok {
		check("process.", p, []want{
			{"exit_code", "number", false}, {"signal", "string", false}, {"timed_out", "bool", false}, {"duration_ms", "number", false},
			{"stdout", "string", false}, {"stderr", "string", false}, {"stdout_encoding", "string", false}, {"stderr_encoding", "string", false},
			{"stdout_bytes", "number", false}, {"stderr_bytes", "number", false}, {"stdout_truncated", "bool", false},
			{"stderr_truncated", "bool", false}, {"killed_descendants", "number", false},
		})
	}
	if e, ok := d["error"].(map[string]any); ok {
		check("error.", e, []want{{"code", "string", false}, {"message", "string", false}})
	}
	env := r.env
	if env.SchemaVersion != 1 || env.Kind != "proxy_exec_result" || !strings.HasPrefix(env.ID, "ex-") || env.Vault == "" {
		fail("bad header")
	}
	switch env.Decision {
	case wire.Allow, wire.AllowWithCheckpoint, wire.Deny, wire.RequireApproval:
	default:
		fail("decision %q", env.Decision)
	}
	if len(env.Policy.Reasons) == 0 && env.Error == nil {
		fail("a decision without reasons")
	}
	if env.Error == nil && env.DecisionID == "" {
		fail("a decision without a decision_id")
	}
	if env.Timing.TotalMS <= 0 {
		fail("total_ms %v", env.Timing.TotalMS)
	}
	// The exit status tells what happened.
	switch {
	case env.Process != nil && env.Error == nil:
		want := env.Process.ExitCode
		if env.Process.TimedOut {
			want = wire.ExitTimedOut
		}
		if e := env.Effects; env.Preview != nil || e != nil && e.Outcome != wire.EffectsKept {
			want = wire.ExitNotRun // the changes are not the vault's: undone, held or previewed
		}
		if r.code != want {
			fail("exit %d, want %d", r.code, want)
		}
		if env.Mount == nil {
			fail("a run without a mount")
		}
	case env.Decision == wire.Deny:
		if r.code != wire.ExitNotRun && r.code != wire.ExitAvfsFailed {
			fail("deny: exit %d", r.code)
		}
	case env.Error != nil && (env.Error.Code == wire.CodeApprovalRejected || env.Error.Code == wire.CodeApprovalNotFound),
		env.Error == nil && env.Decision == wire.RequireApproval:
		if r.code != wire.ExitNotRun || env.Process != nil || env.Mount != nil {
			fail("not run: exit %d", r.code)
		}
	case env.Error != nil:
		if r.code != wire.ExitAvfsFailed {
			fail("error %s: exit %d, want 125", env.Error.Code, r.code)
		}
	default:
		fail("no process, no error: exit %d", r.code)
	}
	if env.Decision == wire.Deny && (env.Process != nil || env.Mount != nil || env.Checkpoint != nil || env.Approval != nil || len(env.Changes) > 0) {
		fail("a denied command ran")
	}
	if h, ok := d["hints"]; ok {
		if hs, _ := h.([]any); len(hs) == 0 {
			fail("hints is present but not a list of hints")
		}
		for _, h := range env.Hints {
			if h.Code == "" || h.Message == "" || env.Process == nil {
				fail("a hint without a code or a message, or of a run that did not run: %+v", h)
			}
		}
	}
	if env.ChangesTruncated != (env.ChangesTotal > len(env.Changes)) || env.ChangesTotal < len(env.Changes) {
		fail("changes_total %d, changes_truncated %v, %d listed", env.ChangesTotal, env.ChangesTruncated, len(env.Changes))
	}
	if !slices.IsSortedFunc(env.Changes, func(a, b wire.Change) int { return strings.Compare(a.Path, b.Path) }) {
		fail("changes not sorted by path")
	}
}

// want checks the decision and the exit status.
func (r proxyRun) want(t *testing.T, decision wire.Decision, code int) {
	t.Helper()
	if r.env.Decision != decision || r.code != code {
		t.Fatalf("avfs %q: decision %s exit %d, want %s exit %d\n%s\nstderr: %s", r.args, r.env.Decision, r.code, decision, code, r.raw, r.stderr)
	}
}

// exits checks that the command ran, whatever the decision, and exited with code.
func (r proxyRun) exits(t *testing.T, code int) {
	t.Helper()
	if r.code != code || r.env.Process == nil || r.env.Error != nil {
		t.Fatalf("avfs %q: exit %d, want %d (run)\n%s\nstderr: %s", r.args, r.code, code, r.raw, r.stderr)
	}
}

// ok checks that the command ran and exited 0.
func (r proxyRun) ok(t *testing.T, decision wire.Decision) {
	t.Helper()
	r.want(t, decision, 0)
	if r.env.Error != nil || r.env.Process == nil {
		t.Fatalf("avfs %q: not run\n%s", r.args, r.raw)
	}
}

// stdout is the command's standard output, decoded.
func (r proxyRun) stdout(t *testing.T) string {
	t.Helper()
	p := r.env.Process
	if p == nil {
		t.Fatalf("avfs %q: no process\n%s", r.args, r.raw)
	}
	if p.StdoutEncoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(p.Stdout)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return p.Stdout
}

// reasonIDsOf lists the envelope's reason ids.
func reasonIDsOf(env wire.Envelope) []string {
	var ids []string
	for _, r := range env.Policy.Reasons {
		ids = append(ids, r.ID)
	}
	return ids
}

// change is an envelope change in a form easy to compare.
func changeLine(c wire.Change) string {
	size := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	}
	return fmt.Sprintf("%s %s %s %s>%s %s>%s", c.Op, c.Kind, c.Path, size(c.SizeBefore), size(c.SizeAfter), c.ModeBefore, c.ModeAfter)
}

func changeLines(cs []wire.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, changeLine(c))
	}
	return out
}

// auditEntry is one row of `avfs audit --json`.
type auditEntry struct {
	ID      int64          `json:"id"`
	Op      string         `json:"op"`
	Path    string         `json:"path"`
	Details map[string]any `json:"details"`
}

func (a *avfs) audit() []auditEntry {
	a.t.Helper()
	var doc struct {
		Entries []auditEntry `json:"entries"`
	}
	a.into(&doc, "audit")
	return doc.Entries
}

func (a *avfs) checkpointIDs() []int64 {
	a.t.Helper()
	var doc struct {
		Checkpoints []struct {
			ID int64 `json:"id"`
		} `json:"checkpoints"`
	}
	a.into(&doc, "checkpoint", "list")
	var ids []int64
	for _, c := range doc.Checkpoints {
		ids = append(ids, c.ID)
	}
	return ids
}

// approvalStatus is the status `avfs approval show` reports.
func (a *avfs) approvalStatus(id string) string {
	a.t.Helper()
	var ap struct {
		Status string `json:"status"`
	}
	a.into(&ap, "approval", "show", id)
	return ap.Status
}

// checkpoints is the number of checkpoints of the vault.
func (a *avfs) checkpoints() int {
	a.t.Helper()
	var l struct {
		Checkpoints []json.RawMessage `json:"checkpoints"`
	}
	a.into(&l, "checkpoint", "list")
	return len(l.Checkpoints)
}

// vaultOK runs `avfs vault check`.
func (a *avfs) vaultOK(args ...string) {
	a.t.Helper()
	var c struct {
		OK bool `json:"ok"`
	}
	a.into(&c, append([]string{"vault", "check"}, args...)...)
	if !c.OK {
		a.t.Fatal("vault check: not ok")
	}
}

// waitFor polls cond until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// exitCode is the exit status of a finished command.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestProxyDecisions(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		a.write("hello\n", "/f")
		m := []string{"--mount-mode", mode}

		for _, argv := range [][]string{{"ls"}, {"cat", "f"}} {
			r := a.proxy(m, argv...)
			r.ok(t, wire.Allow)
			equal(t, "mount mode", r.env.Mount.Mode, reportedMode(mode))
			equalSlice(t, "reasons", reasonIDsOf(r.env), []string{"avfs.allow.read_only"})
			if r.env.Checkpoint != nil || r.env.Approval != nil || r.env.Rollback != nil || len(r.env.Changes) != 0 {
				t.Fatalf("%q: %s", argv, r.raw)
			}
			equalSlice(t, "argv", r.env.Command.Argv, argv)
			equal(t, "cwd", r.env.Command.Cwd, "/")
		}
		equal(t, "ls", a.proxy(m, "ls").stdout(t), "f\n")
		equal(t, "cat", a.proxy(m, "cat", "f").stdout(t), "hello\n")

		r := a.proxy(m, "sh", "-c", "echo x > f")
		r.ok(t, wire.AllowWithCheckpoint)
		if r.env.Checkpoint == nil || r.env.Checkpoint.Name != r.env.ID {
			t.Fatalf("no checkpoint named after the run: %s", r.raw)
		}
		equalSlice(t, "changes", changeLines(r.env.Changes), []string{"modified file /f 6>2 0644>0644"})
		equal(t, "f", a.cat("/f"), "x\n")

		// Denied: nothing runs, nothing is mounted or saved, one audit row.
		for _, c := range []struct {
			argv   []string
			reason string
		}{
			{[]string{"cat", "/srv/avfs-test/secret"}, "avfs.deny.outside_vault"},
			{[]string{"sudo", "ls"}, "avfs.deny.privileged"},
		} {
			audit, cps := a.audit(), a.checkpointIDs()
			r := a.proxy(m, c.argv...)
			r.want(t, wire.Deny, wire.ExitNotRun)
			for _, k := range []string{"process", "mount", "checkpoint", "approval", "error"} {
				if r.doc[k] != nil {
					t.Fatalf("%q: %s is not null: %s", c.argv, k, r.raw)
				}
			}
			if !slices.Contains(reasonIDsOf(r.env), c.reason) {
				t.Fatalf("%q: reasons %q, want %s", c.argv, reasonIDsOf(r.env), c.reason)
			}
			after := a.audit()
			if len(after) != len(audit)+1 {
				t.Fatalf("%q: %d new audit rows, want 1", c.argv, len(after)-len(audit))
			}
			row := after[len(after)-1]
			if row.Op != "exec" || row.Details["decision"] != "deny" || row.Details["id"] != r.env.ID {
				t.Fatalf("%q: audit row %+v", c.argv, row)
			}
			equal(t, "checkpoints", fmt.Sprint(a.checkpointIDs()), fmt.Sprint(cps))
		}
		equal(t, "f after the denied runs", a.cat("/f"), "x\n")

		// Needs approval: a pending approval, nothing runs.
		r = a.proxy(m, "curl", "http://example.invalid")
		r.want(t, wire.RequireApproval, wire.ExitNotRun)
		if r.env.Approval == nil || r.env.Approval.Status != "pending" || !strings.HasPrefix(r.env.Approval.ID, "ap-") ||
			r.env.Process != nil || r.env.Mount != nil || r.env.Checkpoint != nil || r.env.Error != nil {
			t.Fatalf("require_approval: %s", r.raw)
		}
		if !r.env.Approval.ExpiresAt.After(time.Now().Add(50 * time.Minute)) {
			t.Fatalf("default approval lifetime: expires %v", r.env.Approval.ExpiresAt)
		}
		equalSlice(t, "reasons", reasonIDsOf(r.env), []string{"avfs.approval.network"})
		equal(t, "approval status", a.approvalStatus(r.env.Approval.ID), "pending")

		// Read-only: nothing the command does reaches the vault.
		// It needs no checkpoint: the policy allows it as a read-only run,
		// and avfs takes none even for a decision that asks for one.
		before := a.checkpoints()
		r = a.proxy(append(m, "--readonly"), "sh", "-c", "echo x > ro; echo y > f")
		if r.env.Process == nil || r.env.Error != nil || len(r.env.Changes) != 0 || r.env.Checkpoint != nil {
			t.Fatalf("--readonly: %s", r.raw)
		}
		equal(t, "read-only run: decision", r.env.Decision, wire.Allow)
		equalSlice(t, "read-only run: reasons", reasonIDsOf(r.env), []string{"avfs.allow.readonly_run"})
		equal(t, "checkpoints after a read-only run", a.checkpoints(), before)
		equalSlice(t, "files after a read-only run", a.ls("/"), []string{"f"})
		equal(t, "f after a read-only run", a.cat("/f"), "x\n")
		// A read-only mount refuses the writes; a copy takes them and
		// says how many it threw away.
		switch mode {
		case "fuse":
			equal(t, "read-only mount: exit", r.env.Process.ExitCode, 2)
			equal(t, "read-only mount: discarded", r.env.Mount.Discarded, 0)
		case "materialize":
			equal(t, "read-only copy: discarded", r.env.Mount.Discarded, 2)
			r = a.proxy(append(m, "--readonly"), "sh", "-c", "cat f; rm f; mkdir -p d/e; ln -s x d/l")
			equal(t, "read-only copy: discarded", r.env.Mount.Discarded, 4)
			r = a.proxy(append(m, "--readonly"), "cat", "f")
			equal(t, "read-only copy: discarded by a reader", r.env.Mount.Discarded, 0)
		}

		// A working directory that is not in the vault is avfs's error (125).
		r = a.proxy(append(m, "--cwd", "/missing"), "ls")
		if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeInvalidInput || r.env.Process != nil {
			t.Fatalf("--cwd /missing: %s", r.raw)
		}
		a.ok("mkdir", "/sub")
		a.write("in sub\n", "/sub/g")
		r = a.proxy(append(m, "--cwd", "/sub"), "sh", "-c", "pwd; cat g")
		r.ok(t, wire.Allow)
		equal(t, "--cwd", r.stdout(t), r.workspace()+"/sub\nin sub\n")
		equal(t, "cwd", r.env.Command.Cwd, "/sub")
		a.vaultOK()
	})
}

// TestProxyFailsBeforeRunning checks that what goes wrong before the run
// (a broken bundle, an unreadable config file) is an
// envelope with exit status 125 and the error's details, and runs nothing.
func TestProxyFailsBeforeRunning(t *testing.T) {
	a := newProxyAVFS(t)
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "x.rego"), []byte("package avfs\n\ndecision := {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")

	r := a.proxy([]string{"--bundle", broken}, "touch", marker)
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeBundleInvalid ||
		r.env.Decision != wire.Deny || r.env.Process != nil || r.env.Checkpoint != nil {
		t.Fatalf("broken bundle: %s", r.raw)
	}
	if d := r.env.Error.Details; d["file"] != filepath.Join(broken, "x.rego") || d["row"] != float64(4) {
		t.Fatalf("broken bundle: details %v", d)
	}
	equalSlice(t, "reasons", reasonIDsOf(r.env), []string{engine.ReasonFailClosed})
	if entries := a.audit(); len(entries) == 0 || entries[len(entries)-1].Op != "exec" {
		t.Fatalf("broken bundle: no audit row: %+v", entries)
	}

	if err := os.WriteFile(filepath.Join(a.home, "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = a.proxy(nil, "touch", marker)
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Process != nil {
		t.Fatalf("broken config: %s", r.raw)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a failed run ran its command: %v", err)
	}
}

// --mountpoint gives the command the same path on every run (tools such as
// python -m venv write it into files), in both modes, and leaves the
// directory as it was.
func TestProxyMountpoint(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		parent := t.TempDir()
		for _, tc := range []struct {
			name   string
			exists bool
		}{{"made", false}, {"existing", true}} {
			dir := filepath.Join(parent, tc.name)
			if tc.exists {
				if err := os.Mkdir(dir, 0o750); err != nil {
					t.Fatal(err)
				}
			}
			// The command sees the host path only without a sandbox (in
			// one, it is always /workspace).
			flags := []string{"--mount-mode", mode, "--mountpoint", dir, "--sandbox", "none"}
			r := a.proxy(flags, "sh", "-c", `printf '#!/bin/sh\necho tool in %s\n' "$PWD" > tool && chmod +x tool && echo "$PWD" > where && echo "$AVFS_MOUNTPOINT" >> where`)
			r.ok(t, wire.AllowWithCheckpoint)
			equal(t, "mount.dir", r.env.Mount.Dir, dir)
			equal(t, "where", a.cat("/where"), dir+"\n"+dir+"\n")
			// The next run finds the absolute path still good.
			r = a.proxy(flags, dir+"/tool")
			r.ok(t, wire.AllowWithCheckpoint)
			equal(t, "tool output", r.stdout(t), "tool in "+dir+"\n")
			fi, err := os.Stat(dir)
			switch {
			case !tc.exists && !os.IsNotExist(err):
				t.Errorf("%s made by avfs is left: %v", dir, err)
			case tc.exists && (err != nil || fi.Mode().Perm() != 0o750):
				t.Errorf("%s: %v %v", dir, fi.Mode(), err)
			case tc.exists:
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Errorf("%s is not empty after the run: %v", dir, ents)
				}
			}
		}
		// A file is no mount point; a materialised copy needs an empty directory.
		file := filepath.Join(parent, "file")
		os.WriteFile(file, nil, 0o644)
		r := a.proxy([]string{"--mount-mode", mode, "--mountpoint", file}, "true")
		if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeInvalidInput {
			t.Errorf("--mountpoint FILE: %s", r.raw)
		}
		full := filepath.Join(parent, "full")
		os.Mkdir(full, 0o755)
		os.WriteFile(filepath.Join(full, "host.txt"), []byte("host\n"), 0o644)
		r = a.proxy([]string{"--mount-mode", mode, "--mountpoint", full}, "cat", "host.txt")
		if mode == "materialize" {
			if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeInvalidInput {
				t.Errorf("--mountpoint of a non-empty directory: %s", r.raw)
			}
		} else {
			r.exits(t, 1) // the mount hides what is under it
		}
		if b, err := os.ReadFile(filepath.Join(full, "host.txt")); err != nil || string(b) != "host\n" {
			t.Errorf("host file under the mount point: %q %v", b, err)
		}
		a.vaultOK()
	})
}

// TestProxyMaterializedCopyReplaced checks that a command which replaces
// its materialised copy by a symlink to a host directory gets nothing of
// that directory read into the vault, and nothing in it removed. It runs
// without a sandbox: in one, the copy's host path is not in the view.
func TestProxyMaterializedCopyReplaced(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.write("vault\n", "/kept.txt")
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"private copy", nil},
		{"existing --mountpoint", []string{"--mountpoint", filepath.Join(parent, "mp")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.flags != nil {
				if err := os.Mkdir(tc.flags[1], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// What the policy sees is `sh swap.sh`; the script does the rest.
			a.on(t).write(`cd / && mv "$AVFS_MOUNTPOINT" "$AVFS_MOUNTPOINT.moved" && ln -s '`+outside+`' "$AVFS_MOUNTPOINT"`+"\n", "/swap.sh")
			r := a.on(t).proxy(append([]string{"--mount-mode", "materialize", "--sandbox", "none"}, tc.flags...), "sh", "swap.sh")
			if r.env.Error == nil || r.env.Error.Code != wire.CodeHostIO {
				t.Fatalf("run that replaced its copy: %s", r.raw)
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != "SECRET\n" {
				t.Fatalf("host directory the copy was replaced by: %q %v", b, err)
			}
			a.on(t).fail(1, "not_found", "stat", "/secret")
			equal(t, "vault file", a.on(t).cat("/kept.txt"), "vault\n")
		})
	}
	a.vaultOK()
}

// hostTree describes every entry under dir: kind, permission bits, and the
// content or link target.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %04o", fi.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %04o %q", fi.Mode().Perm(), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s is missing", what, k)
		} else if g != w {
			t.Errorf("%s: %s is %.200s, want %.200s", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s", what, k)
		}
	}
}

func TestProxyCheckpointRestore(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		// A tree with binary content over several chunks, modes, symlinks
		// (one dangling) and nested directories.
		seed := filepath.Join(t.TempDir(), "seed")
		bin := make([]byte, 300_000)
		for i := range bin {
			bin[i] = byte(i*7 + i/251)
		}
		files := []struct {
			path    string
			mode    os.FileMode
			content []byte
		}{
			{"bin.dat", 0o644, bin},
			{"run.sh", 0o755, []byte("#!/bin/sh\necho run\n")},
			{"secret", 0o600, []byte("s3cret\n")},
			{"empty", 0o640, nil},
			{"sub/dir/nested.txt", 0o444, []byte("nested\n")},
		}
		for _, f := range files {
			p := filepath.Join(seed, f.path)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, f.content, f.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, f.mode)
		}
		os.Chmod(filepath.Join(seed, "sub"), 0o750)
		os.Symlink("bin.dat", filepath.Join(seed, "link"))
		os.Symlink("nowhere/at/all", filepath.Join(seed, "dangling"))
		os.Symlink("dir/nested.txt", filepath.Join(seed, "sub", "rel"))
		a.ok("mkdir", "/p")
		a.ok("import", seed, "/p")
		before := filepath.Join(t.TempDir(), "before")
		a.ok("export", "/p", before)
		equalTrees(t, "import/export", hostTree(t, before), hostTree(t, seed))

		r := a.proxy([]string{"--mount-mode", mode, "--cwd", "/p"}, "sh", "-c",
			"printf XXXX | dd of=bin.dat bs=1 seek=150000 conv=notrunc 2>/dev/null; chmod 600 run.sh; chmod 777 sub; rm link; ln -s run.sh link; "+
				"rm dangling; mkdir dangling; echo new > sub/dir/new.txt; chmod 644 sub/dir/nested.txt; echo more >> sub/dir/nested.txt; : > secret; rm sub/rel")
		r.ok(t, wire.AllowWithCheckpoint)
		if len(r.env.Changes) < 8 {
			t.Fatalf("changes: %q", changeLines(r.env.Changes))
		}
		changed := filepath.Join(t.TempDir(), "changed")
		a.ok("export", "/p", changed)
		if got := hostTree(t, changed); got["link"] != "symlink -> run.sh" || got["dangling"] != "dir 0755" || got["secret"] != "file 0600 \"\"" {
			t.Fatalf("the command's changes are not in the vault: %v", got)
		}

		a.ok("checkpoint", "restore", strconv.FormatInt(r.env.Checkpoint.ID, 10))
		after := filepath.Join(t.TempDir(), "after")
		a.ok("export", "/p", after)
		equalTrees(t, "restored", hostTree(t, after), hostTree(t, seed))
		a.vaultOK()
	})
}

func TestProxyChangeSummary(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		a.write("hello\n", "/edit.txt")
		a.write("bye\n", "/del.txt")
		a.write("r\n", "/old.txt")
		a.write("x\n", "/mode.sh")
		a.ok("mkdir", "/gone")
		a.write("inner\n", "/gone/inner.txt")
		a.ok("ln", "-s", "edit.txt", "/oldlink")
		a.ok("mkdir", "/keep")
		// Every change is made by a grandchild, in the background.
		script := `umask 022; (sh -c "echo new > new.txt; echo more >> edit.txt; rm del.txt; mv old.txt keep/renamed.txt; chmod 755 mode.sh; ` +
			`ln -s edit.txt link; rm oldlink; mkdir d; printf 12345 > d/five; chmod 700 d; rm -r gone") & wait`
		r := a.proxy([]string{"--mount-mode", mode}, "sh", "-c", script)
		r.ok(t, wire.AllowWithCheckpoint)
		equalSlice(t, "changes", changeLines(r.env.Changes), []string{
			"added dir /d ->0 >0700",
			"added file /d/five ->5 >0644",
			"deleted file /del.txt 4>- 0644>",
			"modified file /edit.txt 6>11 0644>0644",
			"deleted dir /gone 0>- 0755>",
			"deleted file /gone/inner.txt 6>- 0644>",
			"added file /keep/renamed.txt ->2 >0644",
			"added symlink /link ->8 >0777",
			"modified file /mode.sh 2>2 0644>0755",
			"added file /new.txt ->4 >0644",
			"deleted file /old.txt 2>- 0644>",
			"deleted symlink /oldlink 8>- 0777>",
		})
		// A run that changes nothing reports nothing.
		r = a.proxy([]string{"--mount-mode", mode}, "sh", "-c", "(sh -c 'cat edit.txt > /dev/null') & wait")
		r.ok(t, wire.AllowWithCheckpoint) // a background job is not known to be read-only
		equal(t, "changes of a read-only run", len(r.env.Changes), 0)

		// Hard links stay links: a write through one name shows through
		// the others, and a name removed leaves the rest.
		a.proxy([]string{"--mount-mode", mode}, "sh", "-c", "echo one > h1; ln h1 h2; ln h1 keep/h3").ok(t, wire.AllowWithCheckpoint)
		r = a.proxy([]string{"--mount-mode", mode}, "sh", "-c", "echo two >> h2; cat keep/h3; rm h1")
		r.ok(t, wire.AllowWithCheckpoint)
		equal(t, "output through a link", r.stdout(t), "one\ntwo\n")
		equalSlice(t, "changes of the linked files", changeLines(r.env.Changes), []string{
			"deleted file /h1 4>- 0644>",
			"modified file /h2 4>8 0644>0644",
		})
		equal(t, "h3", a.cat("/keep/h3"), "one\ntwo\n")

		// Long change lists are cut at --max-changes (the first by path),
		// and counted in full.
		r = a.proxy([]string{"--mount-mode", mode, "--max-changes", "5"}, "sh", "-c", "mkdir many && cd many && touch f0 f1 f2 f3 f4 f5 f6 f7 f8 f9")
		r.ok(t, wire.AllowWithCheckpoint)
		if len(r.env.Changes) != 5 || r.env.ChangesTotal != 11 || !r.env.ChangesTruncated || r.env.Changes[0].Path != "/many" || r.env.Changes[4].Path != "/many/f3" {
			t.Fatalf("--max-changes 5: %s", r.raw)
		}
		r = a.proxy([]string{"--mount-mode", mode, "--max-changes", "0"}, "rm", "-r", "many")
		if len(r.env.Changes) != 11 || r.env.ChangesTotal != 11 || r.env.ChangesTruncated {
			t.Fatalf("--max-changes 0: %s", r.raw)
		}
		for _, p := range []string{"/h2", "/keep/h3"} {
			if e := a.ok("stat", p); e["nlink"] != float64(2) {
				t.Errorf("%s after the run: %v", p, e)
			}
		}

		// Named pipes and Unix sockets work, and their nodes are kept.
		r = a.proxy([]string{"--mount-mode", mode}, "sh", "-c",
			`mkfifo p && (echo via-fifo > p &) && cat p && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("s.sock")'`)
		r.ok(t, wire.AllowWithCheckpoint)
		equal(t, "output through a fifo", r.stdout(t), "via-fifo\n")
		equalSlice(t, "changes of special files", changeLines(r.env.Changes), []string{
			"added fifo /p ->0 >0644",
			"added socket /s.sock ->0 >0755",
		})
		r = a.proxy([]string{"--mount-mode", mode}, "sh", "-c", "(echo again > p &) && cat p && rm s.sock")
		r.ok(t, wire.AllowWithCheckpoint)
		equal(t, "output through the kept fifo", r.stdout(t), "again\n")
		equalSlice(t, "changes of special files", changeLines(r.env.Changes), []string{"deleted socket /s.sock 0>- 0755>"})
		a.vaultOK()
	})
}

func TestProxyRealTools(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		m := []string{"--mount-mode", mode}
		t.Run("git", func(t *testing.T) {
			a := a.on(t)
			if _, err := exec.LookPath("git"); err != nil {
				t.Skip("no git")
			}
			r := a.proxy(m, "sh", "-c", "git init -q repo && cd repo && git config user.email t@example.com && git config user.name t && "+
				"printf 'x\\n' > a.txt && git add a.txt && git commit -q -m first && git rev-list --count HEAD")
			r.ok(t, wire.AllowWithCheckpoint)
			equal(t, "commits", r.stdout(t), "1\n")
			r = a.proxy(m, "git", "-C", "repo", "log", "--format=%s")
			r.ok(t, wire.Allow)
			equal(t, "git log", r.stdout(t), "first\n")
			r = a.proxy(m, "git", "-C", "repo", "status", "--porcelain")
			r.ok(t, wire.Allow)
			equal(t, "git status", r.stdout(t), "")
			if head := a.cat("/repo/.git/HEAD"); !strings.HasPrefix(head, "ref: refs/heads/") {
				t.Fatalf("HEAD: %q", head)
			}
			equal(t, "a.txt", a.cat("/repo/a.txt"), "x\n")
		})
		t.Run("python", func(t *testing.T) {
			a := a.on(t)
			if _, err := exec.LookPath("python3"); err != nil {
				t.Skip("no python3")
			}
			a.write("import os\nprint('py', sum(range(10)), os.getcwd() == os.environ['AVFS_MOUNTPOINT'])\nopen('out.txt', 'w').write('from python\\n')\n", "/hello.py")
			r := a.proxy(m, "python3", "hello.py")
			r.ok(t, wire.AllowWithCheckpoint)
			equal(t, "python", r.stdout(t), "py 45 True\n")
			equal(t, "out.txt", a.cat("/out.txt"), "from python\n")
			if !slices.Contains(changeLines(r.env.Changes), "added file /out.txt ->12 >0644") {
				t.Fatalf("changes %q", changeLines(r.env.Changes))
			}
		})
		t.Run("script", func(t *testing.T) {
			a := a.on(t)
			a.ok("mkdir", "/tools")
			a.write("#!/bin/sh\necho \"script $1 in $(pwd)\"\necho done > script.out\n", "/tools/run.sh")
			r := a.proxy(m, "./tools/run.sh", "x")
			if r.code != 126 || r.env.Process == nil || r.env.Process.ExitCode != 126 {
				t.Fatalf("a script that is not executable: exit %d %s", r.code, r.raw)
			}
			r = a.proxy(m, "chmod", "+x", "tools/run.sh")
			r.ok(t, wire.AllowWithCheckpoint)
			equalSlice(t, "chmod", changeLines(r.env.Changes), []string{"modified file /tools/run.sh 60>60 0644>0755"})
			r = a.proxy(append(m, "--cwd", "/tools"), "./run.sh", "x")
			r.ok(t, wire.AllowWithCheckpoint)
			equal(t, "script", r.stdout(t), "script x in "+r.workspace()+"/tools\n")
			equal(t, "script.out", a.cat("/tools/script.out"), "done\n")
		})
	})
}

func TestProxyTimeouts(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		for _, c := range []struct {
			name   string
			script func(m1, m2 string) string
			signal string
		}{
			// The shell and its sleep ignore SIGTERM: SIGKILL after the grace.
			{"ignores TERM", func(m1, _ string) string { return "trap '' TERM; sleep " + m1 + "; echo never" }, "SIGKILL"},
			// A daemon in its own session, and the shell that started it.
			{"double fork", func(m1, m2 string) string {
				return "(setsid sh -c 'trap \"\" TERM; sleep " + m1 + "' > /dev/null 2>&1 &); sleep " + m2 + "; echo never"
			}, "SIGTERM"},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				a := a.on(t)
				m1, m2 := marker(), marker()
				start := time.Now()
				r := a.proxy([]string{"--mount-mode", mode, "--timeout", "1s", "--kill-grace", "300ms"}, "sh", "-c", c.script(m1, m2))
				took := time.Since(start)
				r.want(t, wire.AllowWithCheckpoint, wire.ExitTimedOut)
				p := r.env.Process
				if !p.TimedOut || p.Signal != c.signal || p.Stdout != "" {
					t.Fatalf("timed out: %s", r.raw)
				}
				if p.KilledDescendants < 1 {
					t.Fatalf("killed_descendants %d", p.KilledDescendants)
				}
				if took > 4*time.Second {
					t.Fatalf("returned after %v", took)
				}
				for _, m := range []string{m1, m2} {
					if left := sleeping(m); len(left) > 0 {
						t.Fatalf("left running: %v", left)
					}
				}
			})
		}
	})
}

func TestProxyOutput(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		m := []string{"--mount-mode", mode}

		// 20 MB on stdout: the head and the tail of 512 KiB are kept.
		r := a.proxy(m, "sh", "-c", `head -c 20000000 /dev/zero | tr '\0' a; echo err >&2`)
		r.ok(t, wire.Allow)
		p := r.env.Process
		const half = 512 << 10
		omitted := fmt.Sprintf("\n[avfs: %d bytes omitted]\n", 20_000_000-2*half)
		if p.StdoutBytes != 20_000_000 || !p.StdoutTruncated || p.StdoutEncoding != "utf-8" ||
			p.Stdout != strings.Repeat("a", half)+omitted+strings.Repeat("a", half) {
			t.Fatalf("flood: bytes %d truncated %v encoding %s, %d bytes kept", p.StdoutBytes, p.StdoutTruncated, p.StdoutEncoding, len(p.Stdout))
		}
		if p.Stderr != "err\n" || p.StderrBytes != 4 || p.StderrTruncated {
			t.Fatalf("stderr beside the flood: %q", p.Stderr)
		}
		if len(r.raw) > 1<<20+16<<10 {
			t.Fatalf("envelope of %d bytes", len(r.raw))
		}

		// `yes` until the timeout: bounded too (each "\n" is two bytes of JSON).
		r = a.proxy(append(m, "--timeout", "500ms"), "yes")
		r.want(t, wire.Allow, wire.ExitTimedOut)
		if p := r.env.Process; !p.StdoutTruncated || p.StdoutBytes <= 1<<20 || len(r.raw) > 3*(1<<20)/2+16<<10 {
			t.Fatalf("yes: %d bytes, truncated %v, envelope %d bytes", p.StdoutBytes, p.StdoutTruncated, len(r.raw))
		}

		// --max-output 1KiB: 512 bytes of head and of tail.
		r = a.proxy(append(m, "--max-output", "1KiB"), "sh", "-c", "yes | head -c 5000")
		r.ok(t, wire.Allow)
		p = r.env.Process
		ys := strings.Repeat("y\n", 2500)
		if want := ys[:512] + "\n[avfs: 3976 bytes omitted]\n" + ys[5000-512:]; p.Stdout != want || p.StdoutBytes != 5000 || !p.StdoutTruncated {
			t.Fatalf("--max-output: %q (%d bytes)", p.Stdout, p.StdoutBytes)
		}

		// Binary output is base64.
		r = a.proxy(m, "printf", `\377\000\001abc\n`)
		r.ok(t, wire.Allow)
		if p := r.env.Process; p.StdoutEncoding != "base64" || p.StdoutBytes != 7 || p.StdoutTruncated {
			t.Fatalf("binary: %s", r.raw)
		}
		equal(t, "binary", r.stdout(t), "\xff\x00\x01abc\n")

		// Binary and cut: the head and the tail, and where the cut is.
		bin := make([]byte, 5000)
		for i := range bin {
			bin[i] = byte(255 - i%256)
		}
		a.okIn(bin, "write", "/bin.dat")
		r = a.proxy(append(m, "--max-output", "1KiB"), "cat", "bin.dat")
		r.ok(t, wire.Allow)
		p = r.env.Process
		if p.StdoutEncoding != "base64" || !p.StdoutTruncated || p.StdoutBytes != 5000 || p.StdoutOmittedAt != 512 {
			t.Fatalf("binary cut: %s", r.raw)
		}
		equal(t, "binary cut", r.stdout(t), string(bin[:512])+string(bin[5000-512:]))

		// A program that does not exist: 127, said on stderr as a shell
		// would, and no checkpoint (nothing could run); one that is not
		// executable: 126.
		before := a.checkpointIDs()
		r = a.proxy(m, "no-such-program-avfs", "x")
		r.want(t, wire.AllowWithCheckpoint, wire.ExitNotFound)
		if r.env.Process.ExitCode != 127 || r.env.Error != nil || r.env.Checkpoint != nil {
			t.Fatalf("not found: %s", r.raw)
		}
		equal(t, "not found: stderr", r.env.Process.Stderr, "avfs: no-such-program-avfs: command not found\n")
		equal(t, "not found: checkpoints", fmt.Sprint(a.checkpointIDs()), fmt.Sprint(before))
		a.write("#!/bin/sh\n", "/noexec.sh")
		r = a.proxy(m, "./noexec.sh")
		r.want(t, wire.AllowWithCheckpoint, wire.ExitNotRun)
		if r.env.Checkpoint == nil || !strings.Contains(r.env.Process.Stderr, "noexec.sh") {
			t.Fatalf("not executable: %s", r.raw)
		}
		r = a.proxy(m, "sh", "-c", "echo oops >&2; exit 3")
		r.exits(t, 3)
		equal(t, "stderr", r.env.Process.Stderr, "oops\n")
		r = a.proxy(m, "sh", "-c", "kill -KILL $$")
		r.exits(t, 128+9)
		equal(t, "signal", r.env.Process.Signal, "SIGKILL")
	})
}

func TestProxyRollbackOnFailure(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		a.write("orig\n", "/f")
		m := []string{"--mount-mode", mode, "--rollback-on-failure"}

		r := a.proxy(m, "sh", "-c", "echo changed > f; echo n > n; exit 1")
		r.want(t, wire.AllowWithCheckpoint, 1)
		rb := r.env.Rollback
		if rb == nil || !rb.Restored || rb.Reason != "exit_code" || r.env.Checkpoint == nil || rb.Checkpoint != *r.env.Checkpoint {
			t.Fatalf("rollback: %s", r.raw)
		}
		equalSlice(t, "changes (made, then rolled back)", changeLines(r.env.Changes), []string{
			"modified file /f 5>8 0644>0644", "added file /n ->2 >0644"})
		equal(t, "f", a.cat("/f"), "orig\n")
		equalSlice(t, "files", a.ls("/"), []string{"f"})

		r = a.proxy(append(m, "--timeout", "500ms"), "sh", "-c", "echo t > t; sleep "+marker())
		r.want(t, wire.AllowWithCheckpoint, wire.ExitTimedOut)
		if rb := r.env.Rollback; rb == nil || !rb.Restored || rb.Reason != "timed_out" {
			t.Fatalf("rollback after a timeout: %s", r.raw)
		}
		equalSlice(t, "files", a.ls("/"), []string{"f"})

		// Success keeps the changes; so does failure without the flag.
		r = a.proxy(m, "sh", "-c", "echo ok > f")
		r.ok(t, wire.AllowWithCheckpoint)
		if r.env.Rollback != nil {
			t.Fatalf("rollback of a success: %s", r.raw)
		}
		r = a.proxy([]string{"--mount-mode", mode}, "sh", "-c", "echo kept > f; exit 2")
		r.want(t, wire.AllowWithCheckpoint, 2)
		if r.env.Rollback != nil {
			t.Fatalf("rollback without the flag: %s", r.raw)
		}
		equal(t, "f", a.cat("/f"), "kept\n")
		a.vaultOK()
	})
}

func TestProxyEnvironment(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t).with("SECRET_TOKEN=hunter2", "FOO=bar", "OTHER=no")
		os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"proxy": {"env": ["FROM_CONFIG=1", "OTHER"]}}`), 0o644)
		for _, sb := range []string{"auto", "none"} {
			r := a.proxy([]string{"--mount-mode", mode, "--sandbox", sb, "--allow-writable-trust", "--env", "FOO", "--env", "K=V", "--env", "MISSING"}, "env")
			r.ok(t, wire.AllowWithCheckpoint)
			vars := map[string]string{}
			for _, line := range strings.Split(strings.TrimSuffix(r.stdout(t), "\n"), "\n") {
				k, v, _ := strings.Cut(line, "=")
				vars[k] = v
			}
			want := map[string]string{
				"FOO": "bar", "K": "V", "FROM_CONFIG": "1", "OTHER": "no",
				"HOME": r.env.Mount.Dir, "AVFS_MOUNTPOINT": r.env.Mount.Dir, "AVFS_VAULT": "default", "AVFS_EXEC_ID": r.env.ID,
			}
			allowed := []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME", "HOME",
				"AVFS_MOUNTPOINT", "AVFS_VAULT", "AVFS_EXEC_ID", "FOO", "K", "FROM_CONFIG", "OTHER"}
			if sb == "auto" { // a sandbox: its own home, tool caches in the vault's cache
				home := r.env.Sandbox.Home
				want["HOME"], want["AVFS_MOUNTPOINT"] = home, "/workspace"
				want["XDG_CACHE_HOME"], want["GOMODCACHE"], want["npm_config_cache"] = home+"/.cache", home+"/.cache/go-mod", home+"/.cache/npm"
				allowed = append(allowed, "XDG_CACHE_HOME", "GOMODCACHE", "npm_config_cache", "YARN_CACHE_FOLDER")
			}
			checkEnvironment(t, r, vars, want, allowed)
			if dir := r.env.Mount.Dir; !strings.HasPrefix(dir, a.runDir()+"/exec-") {
				t.Errorf("mount dir %s is not in the run root", dir)
			}
		}
	})
}

// checkEnvironment checks the variables a run's command saw: want's
// values, nothing but allowed, and no secret.
func checkEnvironment(t *testing.T, r proxyRun, vars, want map[string]string, allowed []string) {
	t.Helper()
	for k, want := range want {
		if vars[k] != want {
			t.Errorf("%s=%q, want %q", k, vars[k], want)
		}
	}
	for k := range vars {
		if !slices.Contains(allowed, k) {
			t.Errorf("%s reached the command", k)
		}
	}
	if vars["PATH"] == "" || strings.Contains(r.stdout(t), "hunter2") {
		t.Errorf("env: %s", r.stdout(t))
	}
}

// startedRun is a proxy exec running in the background.
type startedRun struct {
	cmd       *exec.Cmd
	args      []string
	out, errb bytes.Buffer
}

// startProxy starts `avfs --json proxy exec FLAGS -- ARGV`.
func (a *avfs) startProxy(flags []string, argv ...string) *startedRun {
	a.t.Helper()
	s := &startedRun{args: proxyArgs(flags, argv...)}
	s.cmd = a.command(s.args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.errb
	if err := s.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	return s
}

// wait waits for the run and checks its envelope.
func (s *startedRun) wait(t *testing.T) proxyRun {
	t.Helper()
	err := s.cmd.Wait()
	return decodeProxyRun(t, s.args, exitCode(err), s.out.Bytes(), s.errb.Bytes())
}

// SIGINT to avfs (Ctrl-C) reaches the command as SIGINT, and avfs still
// reports the run and cleans up.
func TestProxyInterrupted(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		mk := marker()
		s := a.startProxy([]string{"--mount-mode", mode}, "sh", "-c",
			`trap 'echo got INT; echo interrupted > note.txt; exit 5' INT; echo started; while :; do sleep `+mk+`; done`)
		waitFor(t, 10*time.Second, "the command to run", func() bool { return len(sleeping(mk)) > 0 })
		if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := s.wait(t)
		if r.code != 5 || r.env.Process == nil || r.env.Process.Stdout != "started\ngot INT\n" || r.env.Process.Interrupted != "SIGINT" {
			t.Fatalf("interrupted run: exit %d: %s", r.code, r.raw)
		}
		equalSlice(t, "changes", changeLines(r.env.Changes), []string{"added file /note.txt ->12 >0644"})
		if left := sleeping(mk); len(left) > 0 {
			t.Fatalf("processes left: %v", left)
		}
		a.vaultOK()
	})
}

// A run killed before its guard started is cleaned up by the next run.
func TestProxyKilledEarly(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	m := []string{"--mount-mode", "fuse"}
	mk := marker()
	s := a.startProxy(m, "sh", "-c", "echo during > during.txt; sleep "+mk)
	waitFor(t, 10*time.Second, "the command to run", func() bool { return len(sleeping(mk)) > 0 })
	s.cmd.Process.Kill()
	s.cmd.Wait()
	r := a.proxy(m, "cat", "during.txt")
	r.ok(t, wire.Allow)
	equal(t, "during.txt", r.stdout(t), "during\n")
	if left := sleeping(mk); len(left) > 0 {
		t.Fatalf("the killed run's command still runs: %v", left)
	}
	waitFor(t, 5*time.Second, "the killed run's guard, if any, to go", func() bool { return len(guarding(a.runDir())) == 0 })
	if left := a.runDirs(); len(left) > 0 {
		t.Errorf("left in the run root: %q", left)
	}
	if mounts := mountsUnder(a.runDir()); len(mounts) > 0 {
		t.Fatalf("mounts left: %q", mounts)
	}
}

// A record planted where runs used to live ($TMPDIR/avfs-exec-<dead
// pid>-*, which anyone sharing /tmp can make), or in the run root under
// another owner, makes no run kill or remove anything: the process in the
// directory it names runs on and the directory stays.
func TestProxyPlantedRecord(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		m := []string{"--mount-mode", mode}
		a.proxy(m, "true").want(t, wire.Allow, 0) // makes the run root
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.Mkdir(victim, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		mk := marker()
		sleeper := exec.Command("sh", "-c", `cd "$1" && exec sleep `+mk, "sh", victim)
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
		waitFor(t, 10*time.Second, "the victim to run", func() bool { return len(sleeping(mk)) > 0 })

		record := fmt.Sprintf(`{"dir":%q,"materialized":%v,"made":true,"kept":493}`, victim, mode == "materialize")
		var planted []string
		plant := func(dir string, uid int) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			planted = append(planted, dir)
			if err := os.WriteFile(filepath.Join(dir, "mountpoint.json"), []byte(record), 0o600); err != nil {
				t.Fatal(err)
			}
			if uid >= 0 {
				if err := os.Lchown(filepath.Join(dir, "mountpoint.json"), uid, uid); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(dir, uid, uid); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Cleanup(func() {
			for _, dir := range planted {
				os.RemoveAll(dir)
			}
		})
		plant(filepath.Join(a.tmpDir(), "avfs-exec-3999999-x"), -1)
		if os.Geteuid() == 0 {
			plant(filepath.Join(a.runDir(), "exec-3999999-y"), 65534)
		}

		a.proxy(m, "true").want(t, wire.Allow, 0)
		if len(sleeping(mk)) != 1 {
			t.Fatal("the process in the directory a planted record names was killed")
		}
		if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
			t.Fatalf("the directory a planted record names was touched: %v", err)
		}
		for _, dir := range planted {
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("another's directory was removed: %v", err)
			}
		}
	})
}

func TestProxyKilled(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		t.Run("private directory", func(t *testing.T) { testProxyKilled(t, mode, "") })
		t.Run("mountpoint", func(t *testing.T) { testProxyKilled(t, mode, filepath.Join(t.TempDir(), "mp")) })
	})
}

// testProxyKilled kills avfs -9 during a run (at mountpoint, when not
// ""), and checks that the next run cleans up and works.
func testProxyKilled(t *testing.T, mode, mountpoint string) {
	{
		a := newProxyAVFS(t)
		a.write("before\n", "/f")
		m := []string{"--mount-mode", mode}
		if mountpoint != "" {
			m = append(m, "--mountpoint", mountpoint)
			t.Cleanup(func() {
				if mounts := mountsUnder(filepath.Dir(mountpoint)); len(mounts) > 0 {
					t.Errorf("mounts left: %q", mounts)
				}
				if _, err := os.Stat(mountpoint); !os.IsNotExist(err) {
					t.Errorf("the --mountpoint avfs made is left: %v", err)
				}
			})
		}
		mk := marker()
		s := a.startProxy(m, "sh", "-c", "echo during > during.txt; sleep "+mk+"; echo never")
		waitFor(t, 10*time.Second, "the command to run", func() bool { return len(sleeping(mk)) > 0 })
		mounted := a.runDir()
		if mountpoint != "" {
			mounted = filepath.Dir(mountpoint)
		}
		if mode == "fuse" {
			if len(mountsUnder(mounted)) != 1 {
				t.Fatalf("mounts while running: %q", mountsUnder(mounted))
			}
			// A run that lasts longer than runner.GuardDelay has a guard.
			waitFor(t, 10*time.Second, "the run's guard", func() bool { return len(guarding(a.runDir())) == 1 })
			// The command does not hold avfs's FUSE connection (it could
			// answer FUSE requests, and would keep a dead mount hanging).
			for _, pid := range append(sleeping(mk), guarding(a.runDir())...) {
				fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
				for _, fd := range fds {
					if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); target == "/dev/fuse" {
						t.Fatalf("process %d holds /dev/fuse as fd %s", pid, fd.Name())
					}
				}
			}
		}
		s.cmd.Process.Kill()
		if err := s.cmd.Wait(); exitCode(err) != -1 || s.out.Len() != 0 {
			t.Fatalf("kill -9: %v, stdout %q", err, s.out.String())
		}
		if mode == "fuse" {
			// The guard outlives avfs only to end what uses its mount, and unmount.
			waitFor(t, 5*time.Second, "the run's processes and mount to go", func() bool {
				return len(sleeping(mk)) == 0 && len(processesUsing(mounted)) == 0 && len(mountsUnder(mounted)) == 0 && len(guarding(a.runDir())) == 0
			})
		}

		// The next run cleans up and works, reading and writing.
		r := a.proxy(m, "cat", "f")
		r.ok(t, wire.Allow)
		equal(t, "f", r.stdout(t), "before\n")
		r = a.proxy(m, "sh", "-c", "echo after > f")
		r.ok(t, wire.AllowWithCheckpoint)
		equalSlice(t, "changes after the kill", changeLines(r.env.Changes), []string{"modified file /f 7>6 0644>0644"})
		if left := sleeping(mk); len(left) > 0 {
			t.Fatalf("the killed run's command still runs: %v", left)
		}
		if left := a.runDirs(); len(left) > 0 {
			t.Errorf("left in the run root: %q", left)
		}
		if mounts := mountsUnder(a.runDir()); len(mounts) > 0 {
			t.Fatalf("mounts left: %q", mounts)
		}
		// What the killed command wrote through the mount stays; a
		// materialised copy that was never synced back is dropped.
		names := a.ls("/")
		if mode == "fuse" {
			equalSlice(t, "files", names, []string{"during.txt", "f"})
		} else {
			equalSlice(t, "files", names, []string{"f"})
		}
		// The killed run's mark was dropped by the next run (it would keep
		// old rows forever).
		db := openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
		defer db.Close()
		var marks int
		if err := db.QueryRow("SELECT COUNT(*) FROM marks").Scan(&marks); err != nil || marks != 0 {
			t.Fatalf("marks left: %d %v", marks, err)
		}
		a.vaultOK()
	}
}

func TestProxyConcurrent(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		m := []string{"--mount-mode", mode}
		a.write("seed\n", "/seed")

		// Runs on one vault take turns: each sees and reports only its own changes.
		var runs []*startedRun
		for i := range 3 {
			runs = append(runs, a.startProxy(m, "sh", "-c", fmt.Sprintf("echo %d > f%d; sleep 0.2", i, i)))
		}
		for i, s := range runs {
			r := s.wait(t)
			r.ok(t, wire.AllowWithCheckpoint)
			equalSlice(t, "changes", changeLines(r.env.Changes), []string{fmt.Sprintf("added file /f%d ->2 >0644", i)})
		}
		equalSlice(t, "files", a.ls("/"), []string{"f0", "f1", "f2", "seed"})

		// While a run holds the vault: --wait 0 fails at once with
		// vault_busy, a read-only run goes ahead, others wait their turn.
		holder := a.startProxy(m, "sh", "-c", "echo > held; sleep 1")
		// Its run directory appears once it holds the vault.
		waitFor(t, 10*time.Second, "the first run", func() bool { return len(a.runDirs()) > 0 })
		r := a.proxy(append(m, "--wait", "0"), "touch", "busy")
		if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeVaultBusy ||
			r.env.Process != nil || r.env.Mount != nil || r.env.Checkpoint != nil {
			t.Fatalf("--wait 0 on a busy vault: exit %d %s", r.code, r.raw)
		}
		r = a.proxy(append(m, "--readonly", "--wait", "0"), "cat", "seed")
		r.ok(t, wire.Allow)
		equal(t, "read-only run beside a writer", r.stdout(t), "seed\n")
		r = a.proxy(m, "touch", "waited")
		r.ok(t, wire.AllowWithCheckpoint)
		equalSlice(t, "changes of the run that waited", changeLines(r.env.Changes), []string{"added file /waited ->0 >0644"})
		r = holder.wait(t)
		r.ok(t, wire.AllowWithCheckpoint)
		equalSlice(t, "changes of the holder", changeLines(r.env.Changes), []string{"added file /held ->1 >0644"})

		// A writer mount of someone else's: runs wait for it too (FUSE runs
		// mount, materialised runs sync back), then give up with vault_busy.
		dir := filepath.Join(t.TempDir(), "mnt")
		os.Mkdir(dir, 0o755)
		mnt := a.startMount(dir)
		start := time.Now()
		r = a.proxy(append(m, "--wait", "300ms"), "touch", "busy")
		if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeVaultBusy || r.env.Process != nil || r.env.Checkpoint != nil {
			t.Fatalf("beside a writer mount: exit %d %s", r.code, r.raw)
		}
		if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
			t.Fatalf("waited %v for --wait 300ms", took)
		}
		mnt.Process.Signal(syscall.SIGTERM)
		mnt.Wait()
		a.proxy(m, "touch", "free").ok(t, wire.AllowWithCheckpoint)
		a.vaultOK()
	})
}

func TestProxyForksInParallel(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		a.ok("vault", "create", "base")
		a.write("base\n", "--vault", "base", "/f")
		a.ok("vault", "fork", "base", "k1")
		a.ok("vault", "fork", "base", "k2")
		var runs []*startedRun
		for _, k := range []string{"k1", "k2"} {
			runs = append(runs, a.startProxy([]string{"--vault", k, "--mount-mode", mode}, "sh", "-c", "echo $AVFS_VAULT > mine; sleep 1"))
		}
		for i, s := range runs {
			r := s.wait(t)
			r.ok(t, wire.AllowWithCheckpoint)
			equalSlice(t, "changes", changeLines(r.env.Changes), []string{"added file /mine ->3 >0644"})
			// Forks do not wait for each other.
			if r.env.Timing.CheckpointMS > 900 {
				t.Errorf("fork %d waited %v ms", i+1, r.env.Timing.CheckpointMS)
			}
		}
		equal(t, "k1", a.cat("--vault", "k1", "/mine"), "k1\n")
		equal(t, "k2", a.cat("--vault", "k2", "/mine"), "k2\n")
		equalSlice(t, "base", a.ls("--vault", "base", "/"), []string{"f"})
		for _, k := range []string{"base", "k1", "k2"} {
			a.vaultOK(k)
		}
	})
}

// A wrong command line is a usage error (exit 2, an error document), not a
// run: nothing is decided, audited or run.
func TestProxyUsageErrors(t *testing.T) {
	a := newProxyAVFS(t)
	for _, args := range [][]string{
		{},
		{"--shell", "ls", "--", "ls"},
		{"--timeout", "soon", "--", "ls"},
		{"--timeout", "-5s", "--", "ls"},
		{"--kill-grace", "-1s", "--", "ls"},
		{"--wait", "-1s", "--", "ls"},
		{"--ttl", "-1h", "--", "ls"},
		{"--max-output", "lots", "--", "ls"},
		{"--max-changes", "-1", "--", "ls"},
		{"--no-such-flag", "--", "ls"},
	} {
		r := a.exec(nil, append([]string{"--json", "proxy", "exec"}, args...)...)
		var doc struct {
			Error *wire.ErrorBody `json:"error"`
		}
		if err := json.Unmarshal(r.stdout, &doc); err != nil || r.code != 2 || doc.Error == nil || doc.Error.Code != wire.CodeUsage {
			t.Errorf("proxy exec %q: exit %d, %s (%v)", args, r.code, r.stdout, err)
		}
	}
	for _, e := range a.audit() {
		if e.Op == "exec" {
			t.Errorf("a usage error was audited as a run: %+v", e)
		}
	}
}

// The checkpoint of a run under way is pinned: its command deleting it (by
// name, or with --keep 0) does not take away what --rollback-on-failure
// restores. Once the run has ended the checkpoint can be deleted; a run
// killed meanwhile pins it no longer.
func TestProxyCheckpointPinned(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		a.write("orig\n", "/f")
		a.ok("checkpoint", "save", "older")
		// The command runs avfs on the same vault: no sandbox, avfs on the PATH.
		m := []string{"--mount-mode", mode, "--rollback-on-failure", "--sandbox", "none", "--allow-writable-trust",
			"--env", "AVFS_HOME", "--env", "PATH=" + filepath.Dir(avfsBin) + ":/usr/bin:/bin"}
		r := a.proxy(m, "sh", "-c", `echo changed > f
avfs --json checkpoint delete "$AVFS_EXEC_ID" > by-name.json
avfs --json checkpoint delete --keep 0 > keep.json
exit 1`)
		r.want(t, wire.AllowWithCheckpoint, 1)
		if rb := r.env.Rollback; rb == nil || !rb.Restored || r.env.Checkpoint == nil {
			t.Fatalf("no rollback: %s", r.raw)
		}
		equal(t, "f", a.cat("/f"), "orig\n")
		equalSlice(t, "files (the command's gone with the rollback)", a.ls("/"), []string{"f"})
		if r.env.Process.Stderr != "" {
			t.Fatalf("stderr: %s", r.env.Process.Stderr)
		}
		cp := r.env.Checkpoint
		var cps struct {
			Checkpoints []struct {
				ID   int64  `json:"id"`
				Name string `json:"name"`
			} `json:"checkpoints"`
		}
		a.into(&cps, "checkpoint", "list")
		if len(cps.Checkpoints) != 1 || cps.Checkpoints[0].ID != cp.ID {
			t.Fatalf("checkpoints after the run: %+v (want only %d: --keep 0 deleted the older one)", cps, cp.ID)
		}
		// Once the run has ended, it goes.
		a.ok("checkpoint", "delete", cp.Name)

		// What the command saw, read back in a run that keeps its changes.
		r = a.proxy([]string{"--mount-mode", mode, "--sandbox", "none", "--allow-writable-trust",
			"--env", "AVFS_HOME", "--env", "PATH=" + filepath.Dir(avfsBin) + ":/usr/bin:/bin"}, "sh", "-c",
			`avfs --json checkpoint delete "$AVFS_EXEC_ID"; avfs --json checkpoint delete --keep 0`)
		r.ok(t, wire.AllowWithCheckpoint)
		var byName, keep map[string]any
		dec := json.NewDecoder(strings.NewReader(r.env.Process.Stdout))
		if err := dec.Decode(&byName); err != nil {
			t.Fatal(err)
		}
		if err := dec.Decode(&keep); err != nil {
			t.Fatal(err)
		}
		if e, _ := byName["error"].(map[string]any); e == nil || e["code"] != string(wire.CodeCheckpointPinned) || e["exec_id"] != r.env.ID {
			t.Fatalf("delete by name: %v", byName)
		}
		deleted, _ := keep["deleted"].([]any)
		pinned, _ := keep["pinned"].([]any)
		if len(deleted) != 0 || len(pinned) != 1 || pinned[0].(map[string]any)["id"] != float64(r.env.Checkpoint.ID) {
			t.Fatalf("--keep 0: %v", keep)
		}
		a.ok("checkpoint", "delete", r.env.Checkpoint.Name)
		a.vaultOK()
	})
}

// A run killed while its checkpoint is pinned pins it no longer: delete
// takes it, and the next run leaves no mark behind.
func TestProxyCheckpointPinKilled(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	a := newProxyAVFS(t)
	mk := marker()
	s := a.startProxy([]string{"--mount-mode", "fuse", "--rollback-on-failure"}, "sh", "-c", "echo during > during.txt; sleep "+mk)
	waitFor(t, 10*time.Second, "the command to run", func() bool { return len(sleeping(mk)) > 0 })
	a.fail(1, string(wire.CodeCheckpointPinned), "checkpoint", "delete", "1")
	s.cmd.Process.Kill()
	s.cmd.Wait()
	a.ok("checkpoint", "delete", "1")
	r := a.proxy([]string{"--mount-mode", "fuse"}, "cat", "during.txt")
	r.ok(t, wire.Allow)
	waitFor(t, 5*time.Second, "the killed run's guard, if any, to go", func() bool { return len(guarding(a.runDir())) == 0 })
	a.vaultOK()
}

// A NUL byte in the config's proxy.env fails the run before anything is
// decided, checkpointed or mounted.
func TestProxyEnvNUL(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.write("orig\n", "/f")
	if err := os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"proxy": {"env": ["OK=1", "BAD=a\u0000b"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.proxy([]string{"--rollback-on-failure"}, "sh", "-c", "echo changed > f")
	e := r.env.Error
	if r.code != wire.ExitAvfsFailed || e == nil || e.Code != wire.CodeInvalidInput || e.Details["key"] != "proxy.env" || e.Details["env"] != "BAD" {
		t.Fatalf("NUL in proxy.env: %s", r.raw)
	}
	if r.env.Checkpoint != nil || r.env.Mount != nil || r.env.Process != nil || r.env.Decision != wire.Deny {
		t.Fatalf("went on after the request stage: %s", r.raw)
	}
	var cps struct {
		Checkpoints []any `json:"checkpoints"`
	}
	a.into(&cps, "checkpoint", "list")
	if len(cps.Checkpoints) != 0 {
		t.Fatalf("checkpoints: %v", cps.Checkpoints)
	}
	if left := a.runDirs(); len(left) > 0 {
		t.Fatalf("run directories: %q", left)
	}
	equal(t, "f", a.cat("/f"), "orig\n")
}
