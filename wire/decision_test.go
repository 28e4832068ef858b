package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJoin(t *testing.T) {
	tests := []struct {
		in   []Decision
		want Decision
	}{
		{nil, Allow},
		{[]Decision{Allow}, Allow},
		{[]Decision{Allow, AllowWithCheckpoint}, AllowWithCheckpoint},
		{[]Decision{RequireApproval, AllowWithCheckpoint}, RequireApproval},
		{[]Decision{Deny, RequireApproval, Allow}, Deny},
		{[]Decision{Allow, "maybe"}, Deny},
		{[]Decision{""}, Deny},
	}
	for _, tt := range tests {
		if got := Join(tt.in...); got != tt.want {
			t.Errorf("Join(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for i, d := range Decisions {
		if d.Rank() != i || !d.Valid() {
			t.Errorf("%q: rank %d valid %v", d, d.Rank(), d.Valid())
		}
	}
	if Decision("ALLOW").Valid() {
		t.Error("decisions are case sensitive")
	}
}

// TestPolicyResultJSON pins the JSON form of a policy result.
func TestPolicyResultJSON(t *testing.T) {
	r := PolicyResult{
		Decision: Deny,
		Reasons:  []Reason{{ID: "avfs.deny.privileged", Message: "m", Decision: Deny}},
		Bundles:  []BundleInfo{{Name: "default", Revision: "r1", Roots: []string{"avfs"}}},
		Sandbox:  SandboxGrant{Network: NetworkHost},
		Trace: []TraceEvent{{Op: "enter", Rule: "data.avfs.decision", Query: "data.avfs.decision",
			Location: &TraceLocation{File: "policies/decision.rego", Row: 3, Col: 1}, Depth: 1,
			Locals: map[string]string{"cmd": `{"program": "ls"}`}}},
		EvalUS: 42,
	}
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"decision":"deny","reasons":[{"id":"avfs.deny.privileged","message":"m","decision":"deny"}],` +
		`"bundles":[{"name":"default","revision":"r1","roots":["avfs"]}],` +
		`"sandbox":{"network":"host"},` +
		`"trace":[{"op":"enter","rule":"data.avfs.decision","query":"data.avfs.decision","location":{"file":"policies/decision.rego","row":3,"col":1},"depth":1,"locals":{"cmd":"{\"program\": \"ls\"}"}}],` +
		`"eval_us":42}`
	if string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	r.Trace = nil
	got, _ = json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(got, &m)
	if _, ok := m["trace"]; ok {
		t.Error("trace should be omitted when empty")
	}
	// A grant of nothing is an empty object, never null.
	r.Sandbox = SandboxGrant{}
	got, _ = json.Marshal(r)
	if !strings.Contains(string(got), `"sandbox":{},`) {
		t.Errorf("JSON without a grant: %s", got)
	}
}
