package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGoldenServe pins the documents of avfs serve: fields may be added,
// never renamed or removed.
func TestGoldenServe(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int64) *int64 { return &n }
	zero := 0
	docs := map[string]any{
		"serve_status": ServeStatus{Kind: ServeStatusKind, Version: "v1.2.3", PID: 4242, Listen: "unix:/home/alice/.avfs/run/avfs.sock",
			StartedAt: at, UptimeMS: 61000, Bundles: []BundleInfo{{Name: "default", Revision: "avfs-default-1", Roots: []string{"avfs"}}},
			LoadedAt: at, RunsInFlight: 2, RunsTotal: 40, Reloads: 1,
			LastReloadError: &ErrorBody{Code: CodeBundleInvalid, Message: "load policy: bundle /etc/avfs/team: rego_parse_error"}, LastReloadAt: &at,
			Sandboxes: &ServeSandboxes{Taken: 37, Built: 3, Prepared: 38, Waiting: 1}},
		"serve_health_stale": ServeHealth{Status: "stale", Error: "load policy: bundle /etc/avfs/team: rego_parse_error"},
		"serve_health_not_ready": ServeHealth{Status: "not_ready", Error: "one or more bundles are not activated: team; one or more plugins are not up: avfs_policy, bundle",
			BundlesNotActivated: []string{"team"},
			PluginsNotOK:        map[string]string{"avfs_policy": "NOT_READY: the bundle(s) team configured in /etc/avfs/opa.yaml have not been activated yet", "bundle": "NOT_READY"}},
		"serve_exec_request": ExecRequest{Argv: []string{"make", "test"}, Cwd: "/src", Vault: "work", TimeoutMS: ms(60000), MaxChanges: &zero,
			Env: []string{"GOFLAGS=-mod=mod"}, WaitMS: ms(0), Sandbox: "namespaces", HostEnv: []string{"PATH=/usr/bin:/bin"}},
		"serve_precheck": PrecheckResult{Kind: PrecheckKind, Decision: RequireApproval,
			Reasons: []Reason{{ID: "net.egress", Decision: RequireApproval, Message: "network access needs approval"}},
			Bundles: []BundleInfo{{Name: "default", Revision: "avfs-default-1", Roots: []string{"avfs"}}}, Vault: "work",
			DecisionID: "3c9d1e7a-2b4f-4a6e-8d0c-1f5b7a9e3d2c", Approval: &PrecheckApproval{ID: "ap-0123456789abcdef", Status: "pending"}},
		"serve_decide": DecideResult{PolicyResult: PolicyResult{Decision: AllowWithCheckpoint,
			Reasons: []Reason{{ID: "fs.write", Decision: AllowWithCheckpoint, Message: "writes the workspace"}},
			Bundles: []BundleInfo{{Name: "default", Revision: "avfs-default-1", Roots: []string{"avfs"}}}, EvalUS: 180},
			DecisionID: "0f8e2c4a-6b1d-4e3f-9a7c-5d2b8e1f0a3c"},
	}
	for name, v := range docs {
		t.Run(name, func(t *testing.T) { checkGolden(t, name, v) })
	}
}

// TestServeOpenAPI checks that docs/serve.openapi.json names every field of
// the request and status types, and no other.
func TestServeOpenAPI(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "serve.openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for schema, v := range map[string]any{"ExecRequest": ExecRequest{}, "DecideRequest": DecideRequest{}, "Status": ServeStatus{}, "Health": ServeHealth{},
		"PrecheckResult": PrecheckResult{}, "PrecheckApproval": PrecheckApproval{}, "RestoreRequest": RestoreRequest{},
		"Sandboxes": ServeSandboxes{}} {
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		var documented []string
		for k := range doc.Components.Schemas[schema].Properties {
			documented = append(documented, k)
		}
		slices.Sort(fields)
		slices.Sort(documented)
		if !slices.Equal(fields, documented) {
			t.Errorf("%s: the type has %v, docs/serve.openapi.json %v", schema, fields, documented)
		}
	}
}
