package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// approvalBundle writes an extension bundle (see docs/policy.md) that sends
// harmless programs, touch and env, for approval, so that an approved run
// really runs and changes the vault.
func approvalBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeApprovalBundle(t, dir)
	return dir
}

func writeApprovalBundle(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".manifest": `{"revision": "proxytest-1", "roots": ["extensions/proxytest"]}`,
		"proxytest.rego": `package extensions.proxytest

# METADATA
# title: Touching files and listing the environment need approval
# custom:
#   id: proxytest.approval.harmless
#   decision: require_approval
reasons contains reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in data.avfs.lib.commands
	cmd.program in {"touch", "env"}
}

reason(meta, subject) := {
	"id": meta.custom.id,
	"decision": meta.custom.decision,
	"message": sprintf("%s: %s", [meta.title, subject]),
}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// request runs argv, which must need approval, and returns the approval id.
func (a *avfs) request(flags []string, argv ...string) string {
	a.t.Helper()
	r := a.proxy(flags, argv...)
	r.want(a.t, wire.RequireApproval, wire.ExitNotRun)
	if r.env.Approval == nil || r.env.Approval.Status != "pending" || r.env.Process != nil || r.env.Error != nil {
		a.t.Fatalf("request: %s", r.raw)
	}
	equal(a.t, "reason", strings.Join(reasonIDsOf(r.env), ","), "proxytest.approval.harmless")
	return r.env.Approval.ID
}

// rejected checks a run refused because of its approval.
func (r proxyRun) rejected(t *testing.T, why string) {
	t.Helper()
	r.refused(t, wire.CodeApprovalRejected, why)
}

// refused checks a run refused with code because of its approval.
func (r proxyRun) refused(t *testing.T, code wire.Code, why string) {
	t.Helper()
	r.want(t, wire.RequireApproval, wire.ExitNotRun)
	if r.env.Error == nil || r.env.Error.Code != code || !strings.Contains(r.env.Error.Message, why) ||
		r.env.Process != nil || r.env.Mount != nil || r.env.Checkpoint != nil {
		t.Fatalf("want %s (%s): %s", code, why, r.raw)
	}
}

func TestProxyApprovals(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		b := []string{"--mount-mode", mode, "--bundle", approvalBundle(t)}

		id := a.request(b, "touch", "approved.txt")
		var list approvalListDoc
		a.into(&list, "approval", "list", "--status", "pending")
		if len(list.Approvals) != 1 || list.Approvals[0].ID != id || strings.Join(list.Approvals[0].Request.Argv, " ") != "touch approved.txt" {
			t.Fatalf("approval list: %+v", list)
		}
		a.proxy(append(b, "--approval", id), "touch", "approved.txt").rejected(t, "not been granted")

		a.ok("approval", "grant", id, "--reason", "fine")
		equal(t, "status", a.approvalStatus(id), "granted")
		r := a.proxy(append(b, "--approval", id), "touch", "approved.txt")
		r.ok(t, wire.RequireApproval)
		if r.env.Approval == nil || r.env.Approval.ID != id || r.env.Approval.Status != "used" || r.env.Checkpoint == nil {
			t.Fatalf("approved run: %s", r.raw)
		}
		equalSlice(t, "changes", changeLines(r.env.Changes), []string{"added file /approved.txt ->0 >0644"})
		equalSlice(t, "files", a.ls("/"), []string{"approved.txt"})
		equal(t, "status", a.approvalStatus(id), "used")

		// Single use.
		a.proxy(append(b, "--approval", id), "touch", "approved.txt").rejected(t, "already used")
		// Denied.
		id = a.request(b, "touch", "denied.txt")
		a.ok("approval", "deny", id, "--reason", "no")
		a.proxy(append(b, "--approval", id), "touch", "denied.txt").rejected(t, "denied")
		a.fail(1, "approval_rejected", "approval", "grant", id)
		// Unknown.
		a.proxy(append(b, "--approval", "ap-0000000000000000"), "touch", "x").refused(t, wire.CodeApprovalNotFound, "no approval")
		equalSlice(t, "files", a.ls("/"), []string{"approved.txt"})
	})
}

type approvalListDoc struct {
	Approvals []struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Request struct {
			Argv []string `json:"argv"`
			Cwd  string   `json:"cwd"`
		} `json:"request"`
	} `json:"approvals"`
}

func TestProxyApprovalBinding(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.ok("mkdir", "/sub")
	b := []string{"--mount-mode", "materialize", "--bundle", approvalBundle(t)}

	// An approval is for one command in one directory.
	id := a.request(b, "touch", "a.txt")
	a.ok("approval", "grant", id)
	a.proxy(append(b, "--approval", id), "touch", "b.txt").rejected(t, "another command")
	a.proxy(append(b, "--approval", id), "touch", "a.txt", "b.txt").rejected(t, "another command")
	a.proxy(append(b, "--approval", id, "--cwd", "/sub"), "touch", "a.txt").rejected(t, "another command")
	// Another vault does not have the approval.
	r := a.proxy(append(b, "--approval", id, "--vault", "other"), "touch", "a.txt")
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeVaultNotFound {
		t.Fatalf("another vault: %s", r.raw)
	}
	a.ok("vault", "create", "other")
	a.proxy(append(b, "--approval", id, "--vault", "other"), "touch", "a.txt").refused(t, wire.CodeApprovalNotFound, "no approval")
	// Still granted: a mismatch does not use it up.
	equal(t, "status", a.approvalStatus(id), "granted")
	a.proxy(append(b, "--approval", id), "touch", "a.txt").ok(t, wire.RequireApproval)
	equalSlice(t, "files", a.ls("/"), []string{"a.txt", "sub"})

	// An approval binds --readonly both ways; a read-only run gets no
	// checkpoint, as it cannot change the vault.
	ro := append(slices.Clone(b), "--readonly")
	id = a.request(ro, "touch", "ro.txt")
	var shown struct {
		Request struct {
			Readonly bool `json:"readonly"`
		} `json:"request"`
	}
	a.into(&shown, "approval", "show", id)
	equal(t, "the approval shows --readonly", shown.Request.Readonly, true)
	a.ok("approval", "grant", id)
	a.proxy(append(b, "--approval", id), "touch", "ro.txt").rejected(t, "another command")
	checkpoints := a.checkpoints()
	r = a.proxy(append(ro, "--approval", id), "touch", "ro.txt")
	r.ok(t, wire.RequireApproval)
	if r.env.Checkpoint != nil || r.env.Mount == nil || r.env.Mount.Discarded != 1 {
		t.Fatalf("approved read-only run: %s", r.raw)
	}
	equal(t, "checkpoints after an approved read-only run", a.checkpoints(), checkpoints)
	id = a.request(b, "touch", "rw.txt")
	a.ok("approval", "grant", id)
	a.proxy(append(ro, "--approval", id), "touch", "rw.txt").rejected(t, "another command")
	equalSlice(t, "files", a.ls("/"), []string{"a.txt", "sub"})

	// Expiry: a request that expired cannot be granted; a grant that
	// expired cannot be used.
	id = a.request(append(b, "--ttl", "1ms"), "touch", "late.txt")
	waitFor(t, 5*time.Second, "the approval to expire", func() bool { return a.approvalStatus(id) == "expired" })
	a.fail(1, "approval_rejected", "approval", "grant", id)
	a.proxy(append(b, "--approval", id), "touch", "late.txt").rejected(t, "expired")
	id = a.request(append(b, "--ttl", "1500ms"), "touch", "late.txt")
	a.ok("approval", "grant", id)
	waitFor(t, 5*time.Second, "the grant to expire", func() bool { return a.approvalStatus(id) == "expired" })
	a.proxy(append(b, "--approval", id), "touch", "late.txt").rejected(t, "expired")
	equalSlice(t, "files", a.ls("/"), []string{"a.txt", "sub"})
}

func TestProxyApproverKey(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t).with("SECRET_TOKEN=not-for-the-command")
	const key = "approver-secret-7f3a"
	keyed := a.with("AVFS_APPROVER_KEY=" + key)
	b := []string{"--mount-mode", "materialize", "--bundle", approvalBundle(t)}

	// Granted without the secret: runs that check grants refuse it.
	id := keyed.request(b, "touch", "x.txt")
	a.ok("approval", "grant", id)
	keyed.proxy(append(b, "--approval", id), "touch", "x.txt").rejected(t, "approver secret")
	equal(t, "status", a.approvalStatus(id), "granted")
	// Granted with another secret: refused too.
	id = keyed.request(b, "touch", "x.txt")
	a.with("AVFS_APPROVER_KEY=wrong").ok("approval", "grant", id)
	keyed.proxy(append(b, "--approval", id), "touch", "x.txt").rejected(t, "approver secret")

	// Granted with the secret: runs.
	id = keyed.request(b, "touch", "x.txt")
	keyed.ok("approval", "grant", id)
	keyed.proxy(append(b, "--approval", id), "touch", "x.txt").ok(t, wire.RequireApproval)
	equalSlice(t, "files", a.ls("/"), []string{"x.txt"})

	// The secret never reaches the command, even when asked for (--env,
	// proxy.env), nor do host variables that were not asked for.
	os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"proxy": {"env": ["AVFS_APPROVER_KEY", "AVFS_APPROVER_KEY=x"]}}`), 0o644)
	e := append(b, "--env", "AVFS_APPROVER_KEY", "--env", "AVFS_APPROVER_KEY=y")
	id = keyed.request(e, "env")
	var shown struct {
		Request struct {
			Env []string `json:"env"`
		} `json:"request"`
	}
	a.into(&shown, "approval", "show", id)
	equalSlice(t, "the approval shows the variables asked for", shown.Request.Env, []string{"AVFS_APPROVER_KEY", "AVFS_APPROVER_KEY=y"})
	keyed.ok("approval", "grant", id)
	r := keyed.proxy(append(e, "--approval", id), "env")
	r.ok(t, wire.RequireApproval)
	out := r.stdout(t)
	if !strings.Contains(out, "AVFS_EXEC_ID=") || strings.Contains(out, "AVFS_APPROVER_KEY") || strings.Contains(out, key) || strings.Contains(out, "SECRET_TOKEN") {
		t.Fatalf("the command's environment:\n%s", out)
	}

	// An approval binds the variables asked for: a granted `env` cannot
	// be used to pass another one.
	id = keyed.request(b, "env")
	keyed.ok("approval", "grant", id)
	keyed.proxy(append(b, "--approval", id, "--env", "SECRET_TOKEN"), "env").rejected(t, "another command")
	r = keyed.proxy(append(b, "--approval", id), "env")
	r.ok(t, wire.RequireApproval)
	if strings.Contains(r.stdout(t), "not-for-the-command") {
		t.Fatalf("the command's environment:\n%s", r.stdout(t))
	}
}

func TestProxyApproverSigningKey(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	b := []string{"--mount-mode", "materialize", "--bundle", approvalBundle(t)}
	keys := t.TempDir()
	signing := filepath.Join(keys, "approver.pem")
	doc := a.ok("approval", "keygen", signing)
	if doc["signing_key"] != signing || doc["public_key"] != signing+".pub" {
		t.Fatalf("keygen: %v", doc)
	}
	if fi, err := os.Stat(signing); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key: %v %v", fi, err)
	}
	a.fail(1, "already_exists", "approval", "keygen", signing)
	other := filepath.Join(keys, "other.pem")
	a.ok("approval", "keygen", other)

	// Before approvers are configured: a grant without proof.
	early := a.request(b, "touch", "early.txt")
	a.ok("approval", "grant", early)

	os.WriteFile(filepath.Join(a.home, "config.json"), []byte(`{"approval": {"public_key_file": "`+signing+`.pub"}}`), 0o644)
	// A grant needs the signing key; a wrong one is refused; neither
	// changes the approval.
	id := a.request(b, "touch", "x.txt")
	a.fail(1, "approver_key_required", "approval", "grant", id)
	a.fail(1, "approver_key_required", "approval", "grant", "--signing-key", other, id)
	a.fail(1, "approver_key_required", "approval", "grant", "--signing-key", signing+".pub", id)
	equal(t, "status after refused grants", a.approvalStatus(id), "pending")
	// The grant made without proof, and one signed by another key, do not run.
	a.proxy(append(b, "--approval", early), "touch", "early.txt").rejected(t, "signing key")
	unconfigured := a.with("AVFS_CONFIG=" + filepath.Join(keys, "none.json"))
	forged := a.request(b, "touch", "forged.txt")
	unconfigured.ok("approval", "grant", "--signing-key", other, forged)
	a.proxy(append(b, "--approval", forged), "touch", "forged.txt").rejected(t, "signing key")

	// Signed with the key: runs.
	a.ok("approval", "grant", "--signing-key", signing, id)
	a.proxy(append(b, "--approval", id), "touch", "x.txt").ok(t, wire.RequireApproval)
	equalSlice(t, "files", a.ls("/"), []string{"x.txt"})

	// The key may come from the environment, which never reaches the command.
	signer := a.with("AVFS_APPROVER_SIGNING_KEY=" + signing)
	e := append(b, "--env", "AVFS_APPROVER_SIGNING_KEY")
	id = signer.request(e, "env")
	signer.ok("approval", "grant", id)
	r := signer.proxy(append(e, "--approval", id), "env")
	r.ok(t, wire.RequireApproval)
	if out := r.stdout(t); !strings.Contains(out, "AVFS_EXEC_ID=") || strings.Contains(out, "AVFS_APPROVER_SIGNING_KEY") {
		t.Fatalf("the command's environment:\n%s", out)
	}

	// A public key that cannot be used fails the run before anything happens.
	os.WriteFile(signing+".pub", []byte("not a key\n"), 0o644)
	r = a.proxy(b, "touch", "y.txt")
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeApproverKey || r.env.Process != nil {
		t.Fatalf("broken public key: %s", r.raw)
	}
}

// For people, the summary line says how to grant a pending approval, and
// only a pending one.
func TestProxyApprovalSummaryLine(t *testing.T) {
	a := newProxyAVFS(t)
	r := a.exec(nil, "proxy", "exec", "--", "curl", "http://example.invalid")
	line := string(r.stderr)
	if r.code != wire.ExitNotRun || !strings.Contains(line, " pending (grant with: avfs approval grant ap-") {
		t.Fatalf("pending: exit %d, %q", r.code, line)
	}
	id := line[strings.Index(line, "approval ap-")+len("approval ") : strings.Index(line, " pending")]
	a.ok("approval", "deny", id)
	r = a.exec(nil, "proxy", "exec", "--approval", id, "--", "curl", "http://example.invalid")
	if line = string(r.stderr); r.code != wire.ExitNotRun || !strings.Contains(line, "approval "+id+" denied") || strings.Contains(line, "grant with") {
		t.Fatalf("denied: exit %d, %q", r.code, line)
	}
}

// TestProxyApprovedNetwork: the default policy gives a run the host's
// network exactly when its network access was approved; before the
// grant (and for any other run) the sandbox has loopback of its own only.
func TestProxyApprovedNetwork(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "reached host") }))
	defer srv.Close()
	a := newProxyAVFS(t)
	argv := []string{"curl", "-sS", "--max-time", "5", srv.URL}
	id := a.requestAny(nil, argv...)
	a.ok("approval", "grant", id)
	r := a.proxy([]string{"--approval", id}, argv...)
	r.ok(t, wire.RequireApproval)
	if r.env.Sandbox == nil || r.env.Sandbox.Mode != wire.SandboxNamespaces || r.env.Sandbox.Network != wire.NetworkHost {
		t.Fatalf("approved network run: %s", r.raw)
	}
	equal(t, "approved curl", r.stdout(t), "reached host")
	// The same listener from a run that was allowed without approval
	// (a script the policy cannot see into) is out of reach.
	a.write("curl -sS --max-time 5 \"$URL\" || echo refused\n", "/fetch.sh")
	r = a.proxy([]string{"--env", "URL=" + srv.URL}, "sh", "fetch.sh")
	r.ok(t, wire.AllowWithCheckpoint)
	if r.env.Sandbox.Network != wire.NetworkNone || !strings.Contains(r.stdout(t), "refused") || strings.Contains(r.stdout(t), "reached host") {
		t.Fatalf("unapproved run reached the host's network: %s", r.raw)
	}
}

// requestAny runs argv, which must need approval under the active
// policy, and returns the pending approval's id.
func (a *avfs) requestAny(flags []string, argv ...string) string {
	a.t.Helper()
	r := a.proxy(flags, argv...)
	r.want(a.t, wire.RequireApproval, wire.ExitNotRun)
	if r.env.Approval == nil || r.env.Approval.Status != "pending" {
		a.t.Fatalf("request: %s", r.raw)
	}
	return r.env.Approval.ID
}
