package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testdataPolicy is the engine's policy test data.
var testdataPolicy = filepath.Join("..", "..", "engine", "testdata", "policy")

// runAVFS runs the binary with a fresh AVFS_HOME (unless env sets one) and
// returns stdout, stderr and the exit status.
func runAVFS(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(avfsBin, args...)
	cmd.Env = append(os.Environ(), "AVFS_HOME="+t.TempDir(), "AVFS_CONFIG=")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// runAVFSJSON runs the binary with --json and decodes the one document it prints.
func runAVFSJSON(t *testing.T, env []string, args ...string) (map[string]any, int) {
	t.Helper()
	stdout, stderr, code := runAVFS(t, env, append([]string{"--json"}, args...)...)
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("avfs %v: not one JSON document (%v)\nstdout: %s\nstderr: %s", args, err, stdout, stderr)
	}
	if dec.More() {
		t.Fatalf("avfs %v printed more than one document: %s", args, stdout)
	}
	return doc, code
}

func reasonIDs(doc map[string]any) []string {
	var ids []string
	list, _ := doc["reasons"].([]any)
	for _, r := range list {
		m, _ := r.(map[string]any)
		id, _ := m["id"].(string)
		ids = append(ids, id)
	}
	return ids
}

func TestPolicyEvalDecisions(t *testing.T) {
	tests := []struct {
		argv     []string
		decision string
		reason   string
	}{
		{[]string{"ls", "-la"}, "allow", "avfs.allow.read_only"},
		{[]string{"rm", "-rf", "build"}, "allow_with_checkpoint", "avfs.checkpoint.changes"},
		{[]string{"curl", "https://example.com"}, "require_approval", "avfs.approval.network"},
		{[]string{"git", "push", "origin", "main"}, "require_approval", "avfs.approval.git_remote"},
		{[]string{"sudo", "reboot"}, "deny", "avfs.deny.privileged"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			doc, code := runAVFSJSON(t, nil, append([]string{"policy", "eval", "--"}, tt.argv...)...)
			if code != 0 {
				t.Fatalf("exit %d: %v", code, doc)
			}
			if doc["decision"] != tt.decision || !slices.Contains(reasonIDs(doc), tt.reason) {
				t.Errorf("got %v %v, want %s with %s", doc["decision"], reasonIDs(doc), tt.decision, tt.reason)
			}
			bundles, _ := doc["bundles"].([]any)
			if len(bundles) != 1 || bundles[0].(map[string]any)["name"] != "default" {
				t.Errorf("bundles = %v", doc["bundles"])
			}
			if _, ok := doc["eval_us"].(float64); !ok {
				t.Errorf("eval_us = %v", doc["eval_us"])
			}
			for _, k := range []string{"input", "trace"} {
				if _, ok := doc[k]; ok {
					t.Errorf("%s printed without being asked for", k)
				}
			}
		})
	}
}

func TestPolicyEvalInputAndExplain(t *testing.T) {
	doc, code := runAVFSJSON(t, nil, "policy", "eval", "--input", "--explain", "full", "--cwd", "/src", "--", "rm", "-rf", "x")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	in, _ := doc["input"].(map[string]any)
	cmd, _ := in["command"].(map[string]any)
	if cmd["program"] != "rm" || in["cwd"] != "/src" {
		t.Errorf("input = %v", in)
	}
	trace, _ := doc["trace"].([]any)
	if len(trace) == 0 {
		t.Fatal("no trace")
	}
	located := 0
	for _, ev := range trace {
		m := ev.(map[string]any)
		if loc, ok := m["location"].(map[string]any); ok && strings.HasPrefix(fmt.Sprint(loc["file"]), "policies/") {
			located++
		}
		if strings.Contains(fmt.Sprint(m), "__local") {
			t.Fatalf("compiler temporary in %v", m)
		}
	}
	if located == 0 {
		t.Error("no trace event located in policies/")
	}

	// People get the same in text.
	stdout, _, code := runAVFS(t, nil, "policy", "eval", "--explain", "notes", "--", "ls")
	if code != 0 || !strings.Contains(stdout, "decision: allow") || !strings.Contains(stdout, "avfs.allow.read_only") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

// TestPolicyEvalSandbox: eval decides for the sandbox's view (namespaces by
// default) or for none, shows the input.sandbox it built and the network
// grant.
func TestPolicyEvalSandbox(t *testing.T) {
	home := []string{"HOME=/home/tester"}
	tests := []struct {
		args     []string
		decision string
		reasons  []string
		network  string
	}{
		{[]string{"--", "cat", "/etc/passwd"}, "allow", []string{"avfs.allow.read_only"}, "none"},
		{[]string{"--sandbox", "none", "--", "cat", "/etc/passwd"}, "deny", []string{"avfs.deny.outside_vault"}, ""},
		{[]string{"--shell", "echo hi > /tmp/x; cat ~/.gitconfig /workspace/README.md"}, "allow", []string{"avfs.allow.read_only"}, "none"},
		{[]string{"--", "rm", "-f", "/usr/bin/python3"}, "deny", []string{"avfs.deny.read_only_system"}, ""},
		{[]string{"--", "curl", "https://example.com"}, "require_approval", []string{"avfs.approval.network"}, "none"},
		{[]string{"--approval", "ap-1", "--", "curl", "https://example.com"}, "require_approval", []string{"avfs.approval.network", "avfs.sandbox.network_host"}, "host"},
		{[]string{"--sandbox", "none", "--approval", "ap-1", "--", "git", "push"}, "require_approval", []string{"avfs.approval.git_remote", "avfs.sandbox.network_host"}, "host"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			doc, code := runAVFSJSON(t, home, append([]string{"policy", "eval"}, tt.args...)...)
			ids := reasonIDs(doc)
			slices.Sort(ids)
			if code != 0 || doc["decision"] != tt.decision || !slices.Equal(ids, tt.reasons) {
				t.Fatalf("exit %d: %v %v, want %s %v", code, doc["decision"], ids, tt.decision, tt.reasons)
			}
			grant, ok := doc["sandbox"].(map[string]any)
			if got, _ := grant["network"].(string); !ok || got != tt.network {
				t.Errorf("sandbox = %v, want network %q", doc["sandbox"], tt.network)
			}
		})
	}

	doc, code := runAVFSJSON(t, home, "policy", "eval", "--input", "--", "cat", "/workspace/a", "~/x", "/tmp/y", "/usr/z", "/var/w")
	in, _ := doc["input"].(map[string]any)
	sb, _ := in["sandbox"].(map[string]any)
	if code != 0 || sb["mode"] != "namespaces" || sb["workspace"] != "/workspace" || sb["home"] != "/home/tester" || sb["reason"] != "" {
		t.Fatalf("exit %d: input.sandbox = %v", code, in["sandbox"])
	}
	if scratch := fmt.Sprint(sb["scratch"]); !strings.Contains(scratch, "/home/tester") || !strings.Contains(scratch, "/tmp") {
		t.Errorf("scratch = %s", scratch)
	}
	var wheres []string
	for _, p := range in["paths"].([]any) {
		m := p.(map[string]any)
		wheres = append(wheres, fmt.Sprintf("%v=%v %v", m["arg"], m["path"], m["where"]))
	}
	want := []string{"/workspace/a=/a vault", "~/x=~/x scratch", "/tmp/y=/tmp/y scratch", "/usr/z=/usr/z read_only_system", "/var/w=/var/w outside"}
	if !slices.Equal(wheres, want) {
		t.Errorf("paths %q, want %q", wheres, want)
	}
	doc, _ = runAVFSJSON(t, home, "policy", "eval", "--input", "--sandbox", "none", "--", "cat", "/workspace/a")
	in, _ = doc["input"].(map[string]any)
	sb, _ = in["sandbox"].(map[string]any)
	p, _ := in["paths"].([]any)
	if sb["mode"] != "none" || sb["reason"] != "--sandbox none" || sb["workspace"] != "" || len(p) != 1 || p[0].(map[string]any)["where"] != "outside" {
		t.Errorf("--sandbox none: sandbox %v paths %v", sb, p)
	}

	// People see the grant in text.
	stdout, _, code := runAVFS(t, home, "policy", "eval", "--approval", "ap-1", "--", "curl", "https://example.com")
	if code != 0 || !strings.Contains(stdout, "sandbox: network host") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

func TestPolicyEvalUsage(t *testing.T) {
	for _, args := range [][]string{
		{"policy", "eval"},
		{"policy", "eval", "--shell", "ls", "--", "ls"},
		{"policy", "eval", "--explain", "everything", "--", "ls"},
		{"policy", "eval", "--sandbox", "chroot", "--", "ls"},
	} {
		doc, code := runAVFSJSON(t, nil, args...)
		errObj, _ := doc["error"].(map[string]any)
		if code != 2 || errObj["code"] != "usage" {
			t.Errorf("avfs %v: exit %d, %v; want a usage error", args, code, doc)
		}
	}
}

func TestPolicyEvalBrokenBundle(t *testing.T) {
	doc, code := runAVFSJSON(t, nil, "policy", "eval", "--no-default-bundle", "--bundle", filepath.Join(testdataPolicy, "broken", "syntax"), "--", "ls")
	errObj, _ := doc["error"].(map[string]any)
	if code != 1 || errObj["code"] != "bundle_invalid" {
		t.Fatalf("exit %d, %v; want bundle_invalid", code, doc)
	}
	if file, _ := errObj["file"].(string); !strings.HasSuffix(file, "broken/syntax/policy.rego") || errObj["row"] != float64(5) {
		t.Errorf("error %v does not name the file and line", errObj)
	}
	_, stderr, code := runAVFS(t, nil, "policy", "eval", "--bundle", filepath.Join(testdataPolicy, "overlap"), "--", "ls")
	if code != 1 || !strings.Contains(stderr, "overlap") || !strings.Contains(stderr, "--no-default-bundle") {
		t.Errorf("overlapping roots: exit %d, %s", code, stderr)
	}
	doc, code = runAVFSJSON(t, nil, "policy", "eval", "--bundle", filepath.Join(testdataPolicy, "ext.tar.gz"),
		"--verification-key", filepath.Join(testdataPolicy, "keys", "es256.pub.pem"), "--", "ls")
	if errObj, _ := doc["error"].(map[string]any); code != 1 || errObj["code"] != "signature_invalid" {
		t.Errorf("unsigned bundle with a key: exit %d, %v", code, doc)
	}
}

func TestPolicyBundlesFromConfigAndHome(t *testing.T) {
	ext, err := filepath.Abs(filepath.Join(testdataPolicy, "ext-signed.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := filepath.Abs(filepath.Join(testdataPolicy, "keys", "es256.pub.pem"))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	bs, _ := json.Marshal(map[string]any{"policy": map[string]any{"bundles": []string{ext}, "verification_key": key}, "later": map[string]any{}})
	if err := os.WriteFile(cfg, bs, 0o644); err != nil {
		t.Fatal(err)
	}
	doc, code := runAVFSJSON(t, []string{"AVFS_CONFIG=" + cfg}, "policy", "eval", "--", "make", "deploy")
	if code != 0 || doc["decision"] != "require_approval" || !slices.Contains(reasonIDs(doc), "acme.approval.deploy") {
		t.Errorf("config bundle: exit %d, %v", code, doc)
	}

	home := t.TempDir()
	if err := os.CopyFS(filepath.Join(home, "policy"), os.DirFS(filepath.Join(testdataPolicy, "ext"))); err != nil {
		t.Fatal(err)
	}
	doc, code = runAVFSJSON(t, []string{"AVFS_HOME=" + home}, "policy", "inspect")
	bundles, _ := doc["bundles"].([]any)
	if code != 0 || len(bundles) != 2 || bundles[1].(map[string]any)["name"] != filepath.Join(home, "policy") {
		t.Errorf("home policy dir: exit %d, %v", code, doc["bundles"])
	}
}

func TestPolicyInspect(t *testing.T) {
	doc, code := runAVFSJSON(t, nil, "policy", "inspect")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, doc)
	}
	bundles, _ := doc["bundles"].([]any)
	if len(bundles) != 1 || bundles[0].(map[string]any)["revision"] == "" {
		t.Errorf("bundles = %v", doc["bundles"])
	}
	ids := map[string]string{}
	for _, r := range doc["rules"].([]any) {
		m := r.(map[string]any)
		ids[m["id"].(string)] = m["title"].(string)
	}
	for _, id := range []string{"avfs.deny.privileged", "avfs.approval.network", "avfs.allow.read_only", "avfs.checkpoint.changes"} {
		if ids[id] == "" {
			t.Errorf("rule %s missing from %v", id, ids)
		}
	}
}

func TestPolicyTest(t *testing.T) {
	tests := filepath.Join("..", "..", "tests", "rego")
	doc, code := runAVFSJSON(t, nil, "policy", "test", tests, "--coverage")
	if code != 0 || doc["failed"] != float64(0) || doc["passed"].(float64) < 10 {
		t.Fatalf("exit %d: passed %v failed %v errors %v", code, doc["passed"], doc["failed"], doc["errors"])
	}
	if cov, _ := doc["coverage"].(map[string]any); cov["percent"] != float64(100) {
		t.Errorf("coverage of the default bundle = %v", cov["percent"])
	}

	// A copy of policies/ takes the default bundle's place, as opa test
	// policies tests/rego would test it.
	doc, code = runAVFSJSON(t, nil, "policy", "test", filepath.Join("..", "..", "policies"), tests, "--coverage")
	if cov, _ := doc["coverage"].(map[string]any); code != 0 || doc["default_bundle"] != false || doc["failed"] != float64(0) || cov["percent"] != float64(100) {
		t.Errorf("policies and tests: exit %d, %v", code, doc)
	}

	// An extension bundle tested with the default bundle, as docs/policy.md shows.
	doc, code = runAVFSJSON(t, nil, "policy", "test", "--coverage", filepath.Join(testdataPolicy, "ext"), filepath.Join(testdataPolicy, "ext-tests"))
	if cov, _ := doc["coverage"].(map[string]any); code != 0 || doc["passed"] != float64(4) || cov["percent"] != float64(100) || doc["default_bundle"] != true {
		t.Errorf("extension tests: exit %d, %v", code, doc)
	}

	failing := t.TempDir()
	src := "package x_test\n\ntest_fails if {\n\tdata.avfs.decision.decision == \"deny\" with input as {}\n\t1 == 2\n}\n\ntest_passes if true\n"
	if err := os.WriteFile(filepath.Join(failing, "x_test.rego"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runAVFS(t, nil, "policy", "test", failing)
	if code != 2 || !strings.Contains(stdout, "FAIL  data.x_test.test_fails") || !strings.Contains(stdout, "PASS  data.x_test.test_passes") ||
		!strings.Contains(stdout, "1 passed, 1 failed") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	doc, code = runAVFSJSON(t, nil, "policy", "test", failing, "--run", "passes")
	if code != 0 || doc["passed"] != float64(1) || len(doc["tests"].([]any)) != 1 {
		t.Errorf("--run: exit %d, %v", code, doc)
	}
	_, _, code = runAVFS(t, nil, "policy", "test", filepath.Join(testdataPolicy, "broken", "syntax"))
	if code != 1 {
		t.Errorf("broken test file: exit %d, want 1", code)
	}
}

// TestPolicyHermetic: a bundle that calls http.send is refused at load
// with the place of the call, unless policy.allow_nondeterministic; a slow
// policy is denied past policy.eval_timeout; a copy of the default bundle
// whose data has the wrong type denies sudo ls.
func TestPolicyHermetic(t *testing.T) {
	writeFile := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := func(t *testing.T, policy map[string]any) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "config.json")
		bs, _ := json.Marshal(map[string]any{"policy": policy})
		writeFile(t, path, string(bs))
		return "AVFS_CONFIG=" + path
	}
	network := t.TempDir()
	writeFile(t, filepath.Join(network, "policy.rego"), "package avfs\n\ndecision := {\"decision\": \"allow\", \"reasons\": []} if {\n\thttp.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"})\n}\n")
	slow := t.TempDir()
	writeFile(t, filepath.Join(slow, "policy.rego"), "package avfs\n\nslow := count([x |\n\tsome x in numbers.range(1, 100000)\n\tsome y in numbers.range(1, 100000)\n\tx + y < 0\n])\n\ndecision := {\"decision\": \"allow\", \"reasons\": []} if slow == 0\n")
	wrongData := t.TempDir()
	if err := os.CopyFS(wrongData, os.DirFS(filepath.Join("..", "..", "policies"))); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(wrongData, "data.json"))
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["avfs"]["config"]["privileged_programs"] = "sudo"
	raw, _ = json.Marshal(data)
	writeFile(t, filepath.Join(wrongData, "data.json"), string(raw))

	t.Run("http.send is refused", func(t *testing.T) {
		doc, code := runAVFSJSON(t, nil, "policy", "eval", "--no-default-bundle", "--bundle", network, "--", "ls")
		errObj, _ := doc["error"].(map[string]any)
		if code != 1 || errObj["code"] != "bundle_invalid" || errObj["builtin"] != "http.send" ||
			errObj["file"] != filepath.Join(network, "policy.rego") || errObj["row"] != float64(4) || errObj["col"] != float64(2) {
			t.Fatalf("exit %d, %v; want bundle_invalid at policy.rego:4:2", code, doc)
		}
		if msg, _ := errObj["message"].(string); !strings.Contains(msg, "policy.allow_nondeterministic") {
			t.Errorf("message %q does not name the setting", msg)
		}
	})
	t.Run("allowed by the config", func(t *testing.T) {
		env := []string{config(t, map[string]any{"allow_nondeterministic": true})}
		doc, code := runAVFSJSON(t, env, "policy", "eval", "--no-default-bundle", "--bundle", network, "--", "ls")
		// Nothing listens on port 1: http.send fails, so the policy fails closed.
		if code != 0 || doc["decision"] != "deny" {
			t.Errorf("exit %d, %v", code, doc)
		}
	})
	t.Run("eval timeout", func(t *testing.T) {
		env := []string{config(t, map[string]any{"eval_timeout": "200ms"})}
		doc, code := runAVFSJSON(t, env, "policy", "eval", "--no-default-bundle", "--bundle", slow, "--", "ls")
		if code != 0 || doc["decision"] != "deny" || !slices.Equal(reasonIDs(doc), []string{"avfs.engine.eval_timeout"}) {
			t.Errorf("exit %d, %v", code, doc)
		}
		doc, code = runAVFSJSON(t, []string{config(t, map[string]any{"eval_timeout": "soon"})}, "policy", "eval", "--", "ls")
		if errObj, _ := doc["error"].(map[string]any); code != 1 || errObj["code"] != "invalid_input" || errObj["key"] != "policy.eval_timeout" {
			t.Errorf("bad eval_timeout: exit %d, %v", code, doc)
		}
	})
	t.Run("wrong-typed data", func(t *testing.T) {
		doc, code := runAVFSJSON(t, nil, "policy", "eval", "--no-default-bundle", "--bundle", wrongData, "--", "sudo", "ls")
		if code != 0 || doc["decision"] != "deny" || !slices.Equal(reasonIDs(doc), []string{"avfs.engine.config_invalid"}) {
			t.Fatalf("exit %d, %v", code, doc)
		}
		if r := doc["reasons"].([]any)[0].(map[string]any); !strings.Contains(r["message"].(string), "privileged_programs must be a list of strings") {
			t.Errorf("reason %v does not name the key", r)
		}
	})
	t.Run("policy test refuses time.now_ns", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "clock_test.rego"), "package clock_test\n\ntest_now if {\n\ttime.now_ns() > 0\n}\n")
		doc, code := runAVFSJSON(t, nil, "policy", "test", dir)
		if errObj, _ := doc["error"].(map[string]any); code != 1 || errObj["code"] != "bundle_invalid" || errObj["builtin"] != "time.now_ns" || errObj["row"] != float64(4) {
			t.Errorf("exit %d, %v", code, doc)
		}
		doc, code = runAVFSJSON(t, []string{config(t, map[string]any{"allow_nondeterministic": true})}, "policy", "test", dir)
		if code != 0 || doc["passed"] != float64(1) {
			t.Errorf("allowed: exit %d, %v", code, doc)
		}
	})
}
