package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"avfs/bundles"
	"avfs/sandbox"
	"avfs/wire"
)

// replayPolicy loads testdata/replay/NAME alone.
func replayPolicy(t *testing.T, name string) *Policy {
	t.Helper()
	p, err := newPolicy(bundles.Options{Paths: []string{filepath.Join("testdata", "replay", name)}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recordCorpus decides each command with p as a run would record it, the
// input going through JSON as it does in a vault.
func recordCorpus(t *testing.T, p *Policy, shells []string, at time.Time) []wire.DecisionRecord {
	t.Helper()
	ctx := context.Background()
	var recs []wire.DecisionRecord
	for i, shell := range shells {
		in, err := Parse(ctx, ParseRequest{Shell: shell, Cwd: "/", PathEnv: "/nonexistent", Sandbox: sandboxView})
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Decide(ctx, in, DecideOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec := wire.DecisionRecord{DecisionID: fmt.Sprint("d", i), Time: at.Add(time.Duration(i) * time.Second), Source: wire.SourceExec, Vault: "v",
			Command: shell, Decision: res.Decision, Reasons: replayReasonIDs(res.Reasons), Bundles: res.Bundles, Input: in}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back wire.DecisionRecord
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, back)
	}
	return recs
}

var sandboxView = sandbox.Input(wire.SandboxNamespaces, "", sandbox.DefaultWorkspace, "/root")

func itemsOf(recs []wire.DecisionRecord) iter.Seq2[ReplayItem, error] {
	return func(yield func(ReplayItem, error) bool) {
		for _, r := range recs {
			if !yield(ReplayItem{Record: r}, nil) {
				return
			}
		}
	}
}

// change is what a test expects of a wire.ReplayChange.
type change struct {
	id, command string
	from, to    wire.Decision
	kind        wire.ReplayChangeKind
	before, now string // reason ids, joined by spaces
}

func changesOf(res wire.ReplayResult) []change {
	var out []change
	for _, c := range res.Changes {
		out = append(out, change{c.DecisionID, c.Command, c.From, c.To, c.Kind, strings.Join(c.ReasonsFrom, " "), strings.Join(c.ReasonsTo, " ")})
	}
	return out
}

func totalsOf(res wire.ReplayResult) []string {
	var out []string
	for _, t := range res.Totals {
		out = append(out, fmt.Sprintf("%s→%s %s: %d", t.From, t.To, t.Kind, t.Count))
	}
	return out
}

var replayShells = []string{
	"ls",                     // d0: allow, unchanged
	"curl https://x.test",    // d1: deny → require_approval
	"wget https://x.test",    // d2: deny, unchanged
	"git push",               // d3: require_approval → deny
	"rm a",                   // d4: allow_with_checkpoint for another rule
	"touch a",                // d5: unchanged
	"ls | curl -d @- x.test", // d6: deny → require_approval, in a pipeline
}

// TestReplay records a corpus of decisions under testdata/replay/v1,
// replays it under v2 and expects exactly the decisions v2 changes, by
// class, and what --fail-on makes of them.
func TestReplay(t *testing.T) {
	ctx := context.Background()
	v1, v2 := replayPolicy(t, "v1"), replayPolicy(t, "v2")
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	recs := recordCorpus(t, v1, replayShells, at)
	// d7 was recorded under an older bundle that denied ls: against what
	// was recorded it is a change, against the current policy (v1) not.
	stale := recs[0]
	stale.DecisionID, stale.Decision, stale.Reasons = "d7", wire.Deny, []string{"t.deny.old"}
	stale.Bundles = []wire.BundleInfo{{Name: "old", Revision: "replay-0", Roots: []string{"avfs"}}}
	recs = append(recs, stale)

	bundleChanges := []change{
		{"d1", "curl https://x.test", wire.Deny, wire.RequireApproval, wire.ChangeLooser, "t.deny.network", "t.approval.network"},
		{"d3", "git push", wire.RequireApproval, wire.Deny, wire.ChangeStricter, "t.approval.git_push", "t.deny.git_push"},
		{"d4", "rm a", wire.AllowWithCheckpoint, wire.AllowWithCheckpoint, wire.ChangeReasons, "t.checkpoint.write", "t.checkpoint.remove"},
		{"d6", "ls | curl -d @- x.test", wire.Deny, wire.RequireApproval, wire.ChangeLooser, "t.deny.network", "t.approval.network"},
	}
	withStale := append(slices.Clone(bundleChanges), change{"d7", "ls", wire.Deny, wire.Allow, wire.ChangeLooser, "t.deny.old", "t.allow.default"})
	cases := []struct {
		name     string
		next     *Policy
		recs     []wire.DecisionRecord
		opts     ReplayOptions
		want     []change
		totals   []string
		replayed int
		failed   bool
	}{
		{"against recorded", v2, recs, ReplayOptions{}, withStale,
			[]string{"deny→allow looser: 1", "deny→require_approval looser: 2", "require_approval→deny stricter: 1", "allow_with_checkpoint→allow_with_checkpoint reasons: 1"}, 8, true},
		{"against current", v2, recs, ReplayOptions{Against: wire.BaselineCurrent, Current: v1}, bundleChanges,
			[]string{"deny→require_approval looser: 2", "require_approval→deny stricter: 1", "allow_with_checkpoint→allow_with_checkpoint reasons: 1"}, 8, true},
		{"the same policy", v1, recs[:7], ReplayOptions{}, nil, nil, 7, false},
		{"stricter only, fail on looser", v2, recs[3:4], ReplayOptions{}, bundleChanges[1:2], []string{"require_approval→deny stricter: 1"}, 1, false},
		{"stricter only, fail on any", v2, recs[3:4], ReplayOptions{FailOn: wire.FailOnAny}, bundleChanges[1:2], []string{"require_approval→deny stricter: 1"}, 1, true},
		{"looser, fail on none", v2, recs[1:2], ReplayOptions{FailOn: wire.FailOnNone}, bundleChanges[:1], []string{"deny→require_approval looser: 1"}, 1, false},
		{"since", v2, recs, ReplayOptions{Since: at.Add(4 * time.Second)}, bundleChanges[2:], []string{"deny→require_approval looser: 1", "allow_with_checkpoint→allow_with_checkpoint reasons: 1"}, 3, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Replay(ctx, c.next, itemsOf(c.recs), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := changesOf(res); !slices.Equal(got, c.want) {
				t.Errorf("changes\n %v\nwant\n %v", got, c.want)
			}
			if got := totalsOf(res); !slices.Equal(got, c.totals) {
				t.Errorf("totals %q, want %q", got, c.totals)
			}
			if res.Replayed != c.replayed || res.Failed != c.failed {
				t.Errorf("replayed %d failed %v, want %d %v", res.Replayed, res.Failed, c.replayed, c.failed)
			}
			if res.Looser+res.Stricter+res.Reasons != len(c.want) {
				t.Errorf("looser %d stricter %d reasons %d for %d changes", res.Looser, res.Stricter, res.Reasons, len(c.want))
			}
			if len(res.Bundles) != 1 || res.Bundles[0].Revision != c.next.Bundles()[0].Revision {
				t.Errorf("bundles %+v", res.Bundles)
			}
			if (c.opts.Against == wire.BaselineCurrent) != (len(res.BaselineBundles) == 1) {
				t.Errorf("baseline bundles %+v", res.BaselineBundles)
			}
		})
	}
	res, err := Replay(ctx, v2, itemsOf(recs[1:2]), ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Changes[0]
	if ch.Recorded != wire.Deny || len(ch.RecordedBundles) != 1 || ch.RecordedBundles[0].Revision != "replay-1" || ch.Time == nil || !ch.Time.Equal(at.Add(time.Second)) ||
		ch.Source != wire.SourceExec || ch.Vault != "v" {
		t.Errorf("change %+v", ch)
	}
}

// The input document survives the JSON of a record: the default policy
// decides every case of the decision corpus (held in namespaces) the
// same after the trip.
func TestReplayRoundTrip(t *testing.T) {
	p := defaultP(t)
	var shells []string
	for _, c := range readCorpus(t, corpusDir) {
		if c.Sandbox == "" {
			shells = append(shells, cmp.Or(c.Shell, QuoteArgv(c.Command)))
		}
	}
	if len(shells) < 50 {
		t.Fatalf("only %d shell cases in the corpus", len(shells))
	}
	recs := recordCorpus(t, p, shells, time.Now())
	res, err := Replay(context.Background(), p, itemsOf(recs), ReplayOptions{FailOn: wire.FailOnAny})
	if err != nil || res.Replayed != len(shells) || len(res.Changes) != 0 {
		t.Fatalf("replayed %d of %d, changes %+v, %v", res.Replayed, len(shells), res.Changes, err)
	}
}

// A corpus file: records and bare inputs, one a line; a bare input's
// baseline is the current policy's; a line that is neither names itself.
func TestReplayCorpus(t *testing.T) {
	ctx := context.Background()
	v1, v2 := replayPolicy(t, "v1"), replayPolicy(t, "v2")
	recs := recordCorpus(t, v1, replayShells[:4], time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	var lines []string
	for _, r := range recs[:3] {
		b, _ := json.Marshal(r)
		lines = append(lines, string(b))
	}
	bare, _ := json.Marshal(recs[3].Input)
	lines = append(lines, "", "// git push, as a bare input", string(bare))
	corpus := strings.Join(lines, "\n") + "\n"
	res, err := Replay(ctx, v2, ReadCorpus(strings.NewReader(corpus), "c.jsonl"), ReplayOptions{Current: v1})
	if err != nil {
		t.Fatal(err)
	}
	want := []change{
		{"d1", "curl https://x.test", wire.Deny, wire.RequireApproval, wire.ChangeLooser, "t.deny.network", "t.approval.network"},
		{"", "git push", wire.RequireApproval, wire.Deny, wire.ChangeStricter, "t.approval.git_push", "t.deny.git_push"},
	}
	if got := changesOf(res); !slices.Equal(got, want) || res.Replayed != 4 {
		t.Errorf("changes %v (replayed %d), want %v", got, res.Replayed, want)
	}
	if lines := []int{res.Changes[0].Line, res.Changes[1].Line}; !slices.Equal(lines, []int{2, 6}) || res.Changes[1].Time != nil {
		t.Errorf("lines %v time %v", lines, res.Changes[1].Time)
	}
	// Without the current policy, the bare input cannot be replayed.
	if _, err := Replay(ctx, v2, ReadCorpus(strings.NewReader(corpus), "c.jsonl"), ReplayOptions{}); wire.CodeOf(err) != wire.CodeInvalidInput || !strings.Contains(err.Error(), "line 6") {
		t.Errorf("a bare input without the current policy: %v", err)
	}
	for _, c := range []struct{ line, want string }{
		{`{"command": "ls"}`, "c.jsonl:2: neither a decision record"},
		{`not json`, "c.jsonl:2: not a JSON object"},
		{`{"input": {"schema_version": 1}, "decision": "maybe"}`, `c.jsonl:2: "maybe" is not a decision`},
		{`{"input": {"schema_version": 2}}`, "c.jsonl:2: input schema_version 2"},
		{`{"schema_version": 1, "commands": "ls"}`, "c.jsonl:2: not an input document"},
	} {
		_, err := Replay(ctx, v2, ReadCorpus(strings.NewReader(lines[0]+"\n"+c.line+"\n"), "c.jsonl"), ReplayOptions{Current: v1})
		if wire.CodeOf(err) != wire.CodeInvalidInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want invalid_input %q", c.line, err, c.want)
		}
	}
	for _, opts := range []ReplayOptions{{Against: "yesterday"}, {FailOn: "some"}} {
		if _, err := Replay(ctx, v2, itemsOf(recs), opts); wire.CodeOf(err) != wire.CodeInvalidInput {
			t.Errorf("%+v: %v", opts, err)
		}
	}
}
