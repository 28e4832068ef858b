package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

// TestWritableTrust: without a sandbox, a run whose command could
// rewrite what avfs trusts (here the config) is
// refused before anything runs, unless --allow-writable-trust; in a
// sandbox, where none of it is in the view, it runs.
func TestWritableTrust(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	cfg := filepath.Join(a.home, "config.json")
	os.WriteFile(cfg, []byte(`{"proxy": {"env": []}}`), 0o644)
	marker := filepath.Join(t.TempDir(), "ran")
	r := a.proxy([]string{"--sandbox", "none"}, "touch", marker)
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeWritableTrust || r.env.Process != nil {
		t.Fatalf("writable trust without a sandbox: %s", r.raw)
	}
	if paths, _ := r.env.Error.Details["paths"].([]any); len(paths) == 0 || !strings.Contains(r.env.Error.Message, cfg) {
		t.Fatalf("the refusal names no path: %s", r.raw)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused command ran")
	}
	a.write("touch \"$MARK\"\n", "/touch.sh")
	r = a.proxy([]string{"--sandbox", "none", "--allow-writable-trust", "--env", "MARK=" + marker}, "sh", "touch.sh")
	if r.code != 0 {
		t.Fatalf("--allow-writable-trust: %s", r.raw)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("--allow-writable-trust did not run it: %v", err)
	}
	r = a.proxy(nil, "true")
	r.ok(t, wire.Allow) // in a sandbox the config is out of reach
}

// TestApproverSecretNotInEnviron: the approver secret avfs was started
// with is not in what the kernel shows of avfs's environment, which a
// command run without a sandbox can read.
func TestApproverSecretNotInEnviron(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t).with("AVFS_APPROVER_KEY=s3cr3t-approver", "AWS_SECRET_ACCESS_KEY=aws-s3cr3t")
	a.write("cat /proc/$PPID/environ | tr '\\\\0' '\\\\n'\n", "/env.sh")
	r := a.proxy([]string{"--sandbox", "none", "--allow-writable-trust"}, "sh", "env.sh")
	r.ok(t, wire.AllowWithCheckpoint)
	out := r.stdout(t)
	if !strings.Contains(out, "AVFS_HOME=") { // it did read avfs's environment
		t.Fatalf("not avfs's environment: %q", out)
	}
	if strings.Contains(out, "s3cr3t-approver") {
		t.Fatalf("the approver secret is in /proc/PPID/environ: %q", out)
	}
	// In a sandbox, avfs's environment is out of reach altogether.
	r = a.proxy(nil, "sh", "env.sh")
	if out := r.stdout(t); strings.Contains(out, "aws-s3cr3t") || strings.Contains(out, "AVFS_HOME=") {
		t.Fatalf("a sandboxed command read avfs's environment: %q", out)
	}
}
