package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/wire"
)

// replayChanges are the changes of a replay as "command: from → to (kind)
// rules → rules".
func replayChanges(res wire.ReplayResult) []string {
	var out []string
	for _, c := range res.Changes {
		out = append(out, c.Command+": "+string(c.From)+" → "+string(c.To)+" ("+string(c.Kind)+") "+
			strings.Join(c.ReasonsFrom, ",")+" → "+strings.Join(c.ReasonsTo, ","))
	}
	return out
}

// replay runs `avfs --json policy replay ARGS` and decodes its document,
// expecting exit status code.
func (a *avfs) replay(code int, args ...string) wire.ReplayResult {
	a.t.Helper()
	r := a.json(nil, append([]string{"policy", "replay"}, args...)...)
	if r.code != code {
		a.t.Fatalf("policy replay %q: exit %d, want %d: %s %s", args, r.code, code, r.stdout, r.stderr)
	}
	var res wire.ReplayResult
	dec := json.NewDecoder(strings.NewReader(string(r.raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		a.t.Fatalf("policy replay %q: %v: %s", args, err, r.raw)
	}
	return res
}

// TestPolicyReplay records decisions through the hooks and proxy exec
// (the default policy), replays them with the ACME extension of
// engine/testdata/policy/ext, and expects exactly the decisions it
// changes, the exit status --fail-on gives, and a corpus file of records
// replayed the same way.
func TestPolicyReplay(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "hooked")
	// The hook's working directory is the vault's /src.
	for _, cmd := range []string{"ls", "make deploy", "rm -rf ../docs", "rm -rf old"} {
		a.claudeHook(claudePayload(t, cmd))
	}
	args := []string{"--json", "--vault", "hooked", "proxy", "exec", "--", "sudo", "ls"}
	r := a.exec(nil, args...)
	denied := decodeProxyRun(t, args, r.code, r.stdout, r.stderr)
	if denied.env.Decision != wire.Deny || denied.env.DecisionID == "" {
		t.Fatalf("proxy exec: %s", denied.raw)
	}
	ext := filepath.Join(testdataPolicy, "ext")
	want := []string{
		"make deploy: allow_with_checkpoint → require_approval (stricter) avfs.checkpoint.changes → acme.approval.deploy",
		"rm -rf ../docs: allow_with_checkpoint → deny (stricter) avfs.checkpoint.changes → acme.deny.rm_outside_src",
	}
	res := a.replay(0, "--vault", "hooked", "--bundle", ext)
	if got := replayChanges(res); !slices.Equal(got, want) || res.Replayed != 5 || res.Stricter != 2 || res.Failed {
		t.Fatalf("replay: %v (replayed %d)\nwant %v", got, res.Replayed, want)
	}
	for _, c := range res.Changes {
		if c.Source != wire.SourceHook || c.Vault != "hooked" || c.DecisionID == "" || c.Time == nil || len(c.RecordedBundles) == 0 {
			t.Errorf("change %+v", c)
		}
	}
	// --fail-on any fails on the stricter ones, and says so in the status.
	if res := a.replay(exitReplayFailed, "--vault", "hooked", "--bundle", ext, "--fail-on", "any"); !res.Failed || len(res.Changes) != 2 {
		t.Errorf("--fail-on any: %+v", res)
	}
	// The current policy (the default) against itself: nothing changes.
	if res := a.replay(0, "--vault", "hooked", "--against", "current", "--fail-on", "any"); len(res.Changes) != 0 || res.Replayed != 5 || len(res.BaselineBundles) == 0 {
		t.Errorf("against current: %+v", res)
	}
	if res := a.replay(0, "--vault", "hooked", "--bundle", ext, "--since", "2999-01-01T00:00:00Z"); res.Replayed != 0 {
		t.Errorf("--since the future replayed %d", res.Replayed)
	}
	// --all: every vault of the store (the default one records nothing
	// here).
	a.ok("vault", "create", "empty")
	if res := a.replay(0, "--all", "--bundle", ext); res.Replayed != 5 || !slices.Contains(res.Sources, "empty") || !slices.Contains(res.Sources, "hooked") {
		t.Errorf("--all: replayed %d of %v", res.Replayed, res.Sources)
	}

	// A corpus: the proxy exec's deny, recorded as if under an older
	// bundle that denied ls too, and a bare input; the extension loosens
	// nothing, but the stale record is looser now: exit 2.
	var recs []wire.DecisionRecord
	ls := a.json(nil, "policy", "eval", "--input", "--shell", "ls")
	var lsEval struct {
		Input *wire.Input `json:"input"`
	}
	if err := json.Unmarshal(ls.raw, &lsEval); err != nil || lsEval.Input == nil {
		t.Fatalf("eval --input: %v %s", err, ls.raw)
	}
	recs = append(recs, wire.DecisionRecord{DecisionID: "old-1", Command: "ls", Decision: wire.Deny, Reasons: []string{"old.deny.ls"}, Input: lsEval.Input})
	bare, _ := json.Marshal(lsEval.Input)
	var lines []string
	for _, r := range recs {
		b, _ := json.Marshal(r)
		lines = append(lines, string(b))
	}
	lines = append(lines, string(bare))
	corpus := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(corpus, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = a.replay(exitReplayFailed, "--corpus", corpus, "--bundle", ext)
	if got := replayChanges(res); !slices.Equal(got, []string{"ls: deny → allow (looser) old.deny.ls → avfs.allow.read_only"}) || res.Replayed != 2 || res.Changes[0].Line != 1 {
		t.Errorf("corpus: %v (replayed %d) %+v", got, res.Replayed, res.Changes)
	}
	if res := a.replay(0, "--corpus", corpus, "--bundle", ext, "--fail-on", "none"); !slices.Equal(res.Sources, []string{corpus}) || res.Failed {
		t.Errorf("--fail-on none: %+v", res)
	}

	// Bad input is a typed error.
	if err := os.WriteFile(corpus, []byte(lines[0]+"\n{\"command\": \"ls\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if eo := a.fail(1, "invalid_input", "policy", "replay", "--corpus", corpus); !strings.Contains(eo["message"].(string), "decisions.jsonl:2") || eo["line"] != float64(2) {
		t.Errorf("a malformed corpus line: %v", eo)
	}
	a.fail(1, "vault_not_found", "policy", "replay", "--vault", "nosuch")
	a.fail(1, "bundle_invalid", "policy", "replay", "--vault", "hooked", "--bundle", filepath.Join(testdataPolicy, "broken", "syntax"))
	a.fail(2, "usage", "policy", "replay", "--vault", "hooked", "--all")
	a.fail(2, "usage", "policy", "replay", "--fail-on", "sometimes")
	a.fail(2, "usage", "policy", "replay", "--since", "yesterday")

	// For people: a line a change, the totals and the verdict.
	r = a.exec(nil, "policy", "replay", "--vault", "hooked", "--bundle", ext)
	out := string(r.stdout)
	for _, s := range []string{"replayed 5 decisions of hooked", "make deploy", "allow_with_checkpoint → deny (stricter): 1", "0 looser, 2 stricter, 0 for other rules: passes --fail-on looser"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}
