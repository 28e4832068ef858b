package wire

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func i64(n int64) *int64 { return &n }

// goldenEnvelopes are envelopes for each way a run ends.
func goldenEnvelopes() map[string]Envelope {
	policy := PolicyReport{
		Reasons: []Reason{{ID: "avfs.checkpoint.changes", Message: "Commands that may change the vault run after a checkpoint: > a.txt", Decision: AllowWithCheckpoint}},
		Bundles: []BundleInfo{{Name: "default", Revision: "avfs-default-1", Roots: []string{"avfs"}}},
		EvalUS:  412,
	}
	ran := Envelope{
		SchemaVersion: EnvelopeSchemaVersion, Kind: EnvelopeKind, ID: "ex-20261129T120410-2d33a8918bc6", Vault: "default",
		Decision: AllowWithCheckpoint, DecisionID: "6f1d3c2a-8b4e-4f0a-9c1d-2e3f4a5b6c7d", Policy: policy,
		Command:    CommandReport{Argv: []string{}, Cwd: "/", Shell: "echo hello > a.txt"},
		Checkpoint: &CheckpointRef{ID: 3, Name: "ex-20261129T120410-2d33a8918bc6"},
		Mount:      &MountReport{Mode: "fuse", Dir: "/home/alice/.avfs/run/exec-4242-9f1c2b/root"},
		Sandbox:    &SandboxReport{Mode: SandboxNamespaces, Workspace: "/workspace", Home: "/home/alice", Network: NetworkNone, Landlock: 7},
		Process: &ProcessReport{ExitCode: 0, DurationMS: 12, Stdout: "", Stderr: "", StdoutEncoding: "utf-8", StderrEncoding: "utf-8",
			StdoutBytes: 0, StderrBytes: 0},
		Changes: []Change{{Path: "/a.txt", Op: "added", Kind: "file", SizeAfter: i64(6), ModeAfter: "0644"},
			{Path: "/old.txt", Op: "deleted", Kind: "file", SizeBefore: i64(3), ModeBefore: "0600"}},
		ChangesTotal: 2,
		Timing:       Timing{PolicyMS: 1.5, CheckpointMS: 0.4, MountMS: 30.2, SandboxMS: 3.1, RunMS: 12.1, SummaryMS: 0.3, TotalMS: 45},
	}
	denied := Envelope{
		SchemaVersion: EnvelopeSchemaVersion, Kind: EnvelopeKind, ID: "ex-20261129T120411-aaaaaaaaaaaa", Vault: "default",
		Decision: Deny, DecisionID: "0b7e4a51-3c2d-4e8f-a1b2-c3d4e5f60718",
		Policy: PolicyReport{Reasons: []Reason{{ID: "avfs.deny.outside_vault", Message: "Paths outside the vault are denied: /etc/passwd", Decision: Deny}},
			Bundles: policy.Bundles, EvalUS: 300},
		Command: CommandReport{Argv: []string{"cat", "/etc/passwd"}, Cwd: "/"},
		Changes: []Change{},
		Timing:  Timing{PolicyMS: 1.1, TotalMS: 1.3},
	}
	approval := denied
	approval.ID, approval.Decision, approval.DecisionID = "ex-20261129T120412-bbbbbbbbbbbb", RequireApproval, "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	approval.Policy.Reasons = []Reason{{ID: "avfs.approval.network", Message: "Network programs need approval: curl https://example.com", Decision: RequireApproval}}
	approval.Command = CommandReport{Argv: []string{"curl", "https://example.com"}, Cwd: "/"}
	approval.Approval = &ApprovalRef{ID: "ap-b2f725522f7b311f", Status: "pending", ExpiresAt: time.Date(2026, 11, 29, 13, 4, 12, 0, time.UTC)}
	timedOut := ran
	timedOut.ID = "ex-20261129T120413-cccccccccccc"
	timedOut.Command = CommandReport{Argv: []string{"sh", "-c", "yes; sleep 100"}, Cwd: "/src"}
	timedOut.Process = &ProcessReport{ExitCode: 143, Signal: "SIGTERM", TimedOut: true, DurationMS: 2000,
		Stdout: "y\ny\n\n[avfs: 1000 bytes omitted]\ny\n", StdoutEncoding: "utf-8", Stderr: "AAEC", StderrEncoding: "base64",
		StdoutBytes: 1010, StderrBytes: 3, StdoutTruncated: true, KilledDescendants: 1}
	timedOut.Changes = []Change{{Path: "/a.txt", Op: "added", Kind: "file", SizeAfter: i64(6), ModeAfter: "0644"}}
	timedOut.ChangesTotal, timedOut.ChangesTruncated = 5000, true
	timedOut.Rollback = &RollbackReport{Restored: true, Checkpoint: *ran.Checkpoint, Reason: "timed_out"}
	unsandboxed := ran
	unsandboxed.ID = "ex-20261129T120415-eeeeeeeeeeee"
	unsandboxed.Sandbox = &SandboxReport{Mode: SandboxNone, Reason: "--sandbox none", Workspace: ran.Mount.Dir, Home: ran.Mount.Dir, Network: NetworkHost}
	unsandboxed.Timing.SandboxMS = 0
	held := ran
	held.ID = "ex-20261129T120418-cdcdcdcdcdcd"
	held.Command = CommandReport{Argv: []string{"sh", "-c", "cp hook .git/hooks/pre-commit"}, Cwd: "/"}
	held.Effects = &EffectsReport{Decision: RequireApproval, Outcome: EffectsHeld, EvalUS: 210,
		Reasons: []Reason{{ID: "avfs.effects.protected_path", Message: "A file that later runs code (git hooks, git configuration, CI configuration) changed: /.git/hooks/pre-commit (added)", Decision: RequireApproval}},
		Held:    &CheckpointRef{ID: 4, Name: "held-ex-20261129T120418-cdcdcdcdcdcd"}}
	held.Approval = &ApprovalRef{ID: "ap-5c1d9e0b7a3f2468", Status: "pending", ExpiresAt: time.Date(2026, 11, 29, 13, 4, 18, 0, time.UTC)}
	held.Changes = []Change{{Path: "/.git/hooks/pre-commit", Op: "added", Kind: "file", SizeAfter: i64(120), ModeAfter: "0755"}}
	held.ChangesTotal = 1
	held.Timing.EffectsMS = 0.6
	previewed := ran
	previewed.ID, previewed.Decision = "ex-20261129T120420-fafafafafafa", RequireApproval
	previewed.Policy.Reasons = []Reason{{ID: "acme.approval.deploy", Message: "Deploys need approval: make deploy", Decision: RequireApproval}}
	previewed.Command = CommandReport{Argv: []string{"make", "deploy"}, Cwd: "/"}
	previewed.Preview = &PreviewReport{Fork: "preview-ex-20261129T120420-fafafafafafa"}
	previewed.Approval = &ApprovalRef{ID: "ap-0a1b2c3d4e5f6071", Status: "pending", ExpiresAt: time.Date(2026, 11, 29, 13, 4, 20, 0, time.UTC)}
	failed := denied
	failed.ID, failed.Decision = "ex-20261129T120414-dddddddddddd", AllowWithCheckpoint
	failed.Error = &ErrorBody{Code: CodeMountFailed, Message: "proxy exec: the mount was not ready after 30s"}
	fellBack := unsandboxed
	fellBack.ID = "ex-20261129T120417-abababababab"
	fellBack.Mount = &MountReport{Mode: "materialized", Dir: "/home/alice/.avfs/run/exec-4243-7e0d1a/root",
		Fallback: &MountFallback{Reason: FallbackMountNotPermitted,
			Message: "mount /home/alice/.avfs/run/exec-4243-7e0d1a/root: mounting is not permitted here (operation not permitted): a container without CAP_SYS_ADMIN, say"}}
	fellBack.Sandbox = &SandboxReport{Mode: SandboxNone, Reason: "--sandbox none", Workspace: fellBack.Mount.Dir, Home: fellBack.Mount.Dir, Network: NetworkHost}
	networkOff := ran
	networkOff.ID = "ex-20261129T120416-ffffffffffff"
	networkOff.Policy.Reasons = []Reason{{ID: "avfs.checkpoint.changes", Message: "Commands that may change the vault run after a checkpoint: go build ./...", Decision: AllowWithCheckpoint}}
	networkOff.Command = CommandReport{Argv: []string{"go", "build", "./..."}, Cwd: "/src"}
	networkOff.Checkpoint = &CheckpointRef{ID: 4, Name: networkOff.ID}
	goErr := "go: downloading golang.org/x/text v0.14.0\nmain.go:2:8: golang.org/x/text@v0.14.0: Get \"https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.zip\": " +
		"dial tcp: lookup proxy.golang.org on 10.0.0.53:53: dial udp 10.0.0.53:53: connect: network is unreachable\n"
	networkOff.Process = &ProcessReport{ExitCode: 1, DurationMS: 310, Stdout: "", Stderr: goErr, StdoutEncoding: "utf-8", StderrEncoding: "utf-8",
		StdoutBytes: 0, StderrBytes: int64(len(goErr))}
	networkOff.Changes, networkOff.ChangesTotal = []Change{}, 0
	networkOff.Hints = []Hint{{Code: HintNetworkOff,
		Message: "The sandbox had no network (sandbox.network \"none\"), and the output shows that the command tried to reach one (\"dial tcp: lookup\"). " +
			"The default policy grants the host's network only to an approved run of a command that needs approval because it reaches the network " +
			"(a network program, a git remote, a package install, a server: data.avfs.config.host_network_reasons). " +
			"Fetch what this command needs with `go mod download`: run the hint's command (it asks for approval and gives approval.id), " +
			"grant it with `avfs approval grant ID`, and run the hint's command again with `--approval ID` after `proxy exec`; " +
			"then run this command again: Go's module cache is in the vault's tool cache (~/.cache), which later runs share. " +
			"For this command itself to get the network, the policy must require approval for it with a reason listed in host_network_reasons " +
			"(docs/policy.md, \"The sandbox grant\"), or it must run without a sandbox (--sandbox none), which gives it the host's network and the rest of the host.",
		Command: "avfs --vault default proxy exec --cwd /src -- go mod download"}}
	// Two files whose names differ only in bytes that are not UTF-8: the
	// same path, told apart by path_b64.
	rawNames := ran
	rawNames.ID = "ex-20261129T120418-cdcdcdcdcdcd"
	rawNames.Command = CommandReport{Argv: []string{}, Cwd: "/", Shell: "printf 'a\\n' > \"$(printf '\\377\\376')\".txt; printf 'b\\n' > \"$(printf '\\376\\377')\".txt"}
	rawNames.Policy.Reasons = []Reason{{ID: "avfs.checkpoint.changes", Message: "Commands that may change the vault run after a checkpoint: > \"$(printf '\\377\\376')\".txt", Decision: AllowWithCheckpoint}}
	rawNames.Changes = []Change{{Path: "/\xfe\xff.txt", PathB64: B64("/\xfe\xff.txt"), Op: "added", Kind: "file", SizeAfter: i64(2), ModeAfter: "0644"},
		{Path: "/\xff\xfe.txt", PathB64: B64("/\xff\xfe.txt"), Op: "added", Kind: "file", SizeAfter: i64(2), ModeAfter: "0644"}}
	// A run in a new fork of the vault (proxy exec --fork).
	forked := ran
	forked.ID, forked.Vault, forked.ForkedFrom = "ex-20261129T120419-efefefefefef", "attempt-1", "default"
	forked.Checkpoint = &CheckpointRef{ID: 1, Name: forked.ID}
	return map[string]Envelope{"envelope_forked": forked, "envelope_raw_names": rawNames, "envelope_ran": ran, "envelope_denied": denied, "envelope_approval": approval, "envelope_timed_out": timedOut, "envelope_failed": failed,
		"envelope_unsandboxed": unsandboxed, "envelope_network_off": networkOff, "envelope_fallback": fellBack, "envelope_effects_held": held, "envelope_preview": previewed}
}

// TestGoldenEnvelopes pins the envelope's JSON and checks it against the
// published JSON Schema (with OPA's json.match_schema).
func TestGoldenEnvelopes(t *testing.T) {
	schema, err := os.ReadFile(filepath.Join("..", "docs", "envelope.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schemaDoc any
	if err := json.Unmarshal(schema, &schemaDoc); err != nil {
		t.Fatalf("schema: %v", err)
	}
	pq, err := rego.New(rego.Query("[ok, errs] := json.match_schema(input.doc, input.schema)")).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range goldenEnvelopes() {
		t.Run(name, func(t *testing.T) {
			want := checkGolden(t, name, env)
			var doc any
			if err := json.Unmarshal(want, &doc); err != nil {
				t.Fatal(err)
			}
			rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"doc": doc, "schema": schemaDoc}))
			if err != nil || len(rs) != 1 {
				t.Fatalf("schema check: %v %v", rs, err)
			}
			if ok, _ := rs[0].Bindings["ok"].(bool); !ok {
				t.Errorf("%s does not match docs/envelope.schema.json: %v", name, rs[0].Bindings["errs"])
			}
		})
	}
	// The schema rejects an envelope with a required field missing.
	var doc map[string]any
	b, _ := json.Marshal(goldenEnvelopes()["envelope_ran"])
	json.Unmarshal(b, &doc)
	delete(doc, "timing")
	rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"doc": doc, "schema": schemaDoc}))
	if err != nil || len(rs) != 1 {
		t.Fatal(err)
	}
	if ok, _ := rs[0].Bindings["ok"].(bool); ok {
		t.Error("the schema accepts an envelope without timing")
	}
	// Nor one whose decision id is not a UUID.
	json.Unmarshal(b, &doc)
	doc["decision_id"] = "ex-1"
	rs, err = pq.Eval(context.Background(), rego.EvalInput(map[string]any{"doc": doc, "schema": schemaDoc}))
	if err != nil || len(rs) != 1 {
		t.Fatal(err)
	}
	if ok, _ := rs[0].Bindings["ok"].(bool); ok {
		t.Error("the schema accepts a decision_id that is not a UUID")
	}
}

// TestGoldenErrorDocument pins the error document every command prints with --json.
func TestGoldenErrorDocument(t *testing.T) {
	err := Errorf(CodeQuotaExceeded, "write /big: vault size quota exceeded").With("quota", "max_size_mb").With("limit", 1)
	got, _ := json.Marshal(ErrorDocument{Error: ErrorObject(err)})
	want := `{"error":{"code":"quota_exceeded","limit":1,"message":"write /big: vault size quota exceeded","quota":"max_size_mb"}}`
	if string(got) != want {
		t.Errorf("error document:\n got %s\nwant %s", got, want)
	}
}

// checkGolden compares the indented JSON of v with testdata/golden/NAME.json
// (rewriting the file first with -update) and returns the golden bytes. A
// difference fails the test: fields may be added, never renamed or
// removed.
func checkGolden(t *testing.T, name string, v any) []byte {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./wire -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s changed: fields may be added, never renamed or removed.\n got %s\nwant %s", name, got, want)
	}
	return want
}

// TestFallbackReasonsInSchema checks that the schema lists exactly the
// reasons of a mount fallback.
func TestFallbackReasonsInSchema(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "envelope.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Mount struct {
				OneOf []struct {
					Properties struct {
						Fallback struct {
							Properties struct {
								Reason struct {
									Enum []FallbackReason `json:"enum"`
								} `json:"reason"`
							} `json:"properties"`
						} `json:"fallback"`
					} `json:"properties"`
				} `json:"oneOf"`
			} `json:"mount"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var got []FallbackReason
	for _, o := range doc.Properties.Mount.OneOf {
		got = append(got, o.Properties.Fallback.Properties.Reason.Enum...)
	}
	if fmt.Sprint(got) != fmt.Sprint(FallbackReasons) {
		t.Errorf("schema's mount.fallback.reason enum %v, want %v", got, FallbackReasons)
	}
}
