package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"avfs/wire"
)

func testRecord(id string, d wire.Decision, at time.Time) DecisionRecord {
	return DecisionRecord{DecisionID: id, Time: at, Source: wire.SourceExec, Command: "rm -rf x", Decision: d,
		Reasons: []string{"avfs.checkpoint.changes"}, Bundles: []wire.BundleInfo{{Name: "default", Revision: "r1", Roots: []string{"avfs"}}},
		Input: &wire.Input{SchemaVersion: 1, Command: wire.Command{Argv: []string{"rm", "-rf", "x"}, Program: "rm"}, Cwd: "/",
			Commands: []wire.Command{{Argv: []string{"rm", "-rf", "x"}, Program: "rm", Flags: []string{"-r", "-f"}}}, Paths: []wire.Path{}}}
}

func recordedIDs(t *testing.T, v *Vault, q DecisionQuery) []string {
	t.Helper()
	page, err := v.Decisions(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range page.Records {
		ids = append(ids, r.DecisionID)
	}
	return ids
}

// A decision reads back as recorded, input and all; recording is checked.
func TestRecordDecision(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	at := time.Now().Add(-time.Hour).Round(time.Second).Add(123) // within the age limit
	rec := testRecord("d1", wire.AllowWithCheckpoint, at)
	if err := v.RecordDecision(ctx, rec); err != nil {
		t.Fatal(err)
	}
	page, err := v.Decisions(ctx, DecisionQuery{})
	if err != nil || len(page.Records) != 1 || page.Next != 0 {
		t.Fatalf("%+v %v", page, err)
	}
	got := page.Records[0]
	rec.Vault = "t"
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(rec)
	if string(gotJSON) != string(wantJSON) || !got.Time.Equal(at) {
		t.Errorf("read back\n %s\nwant\n %s", gotJSON, wantJSON)
	}
	for _, c := range []struct {
		name string
		rec  DecisionRecord
		code wire.Code
	}{
		{"same id", testRecord("d1", wire.Deny, at), wire.CodeAlreadyExists},
		{"no id", testRecord("", wire.Deny, at), wire.CodeInvalidInput},
		{"bad decision", testRecord("d2", "maybe", at), wire.CodeInvalidInput},
		{"no input", func() DecisionRecord { r := testRecord("d3", wire.Deny, at); r.Input = nil; return r }(), wire.CodeInvalidInput},
	} {
		if err := v.RecordDecision(ctx, c.rec); wire.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if n, err := v.CountDecisions(ctx); err != nil || n != 1 {
		t.Errorf("%d decisions %v, want 1", n, err)
	}
	mustCheck(t, v)
}

// The vault keeps at most Max decisions, the newest, and none older than
// MaxAgeS, pruned as it records; pages and --since select.
func TestDecisionLimits(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	if lim, err := v.DecisionLimits(ctx); err != nil || lim != DefaultDecisionLimits() {
		t.Fatalf("a new vault's limits %+v %v", lim, err)
	}
	three, day := int64(3), int64(24*3600)
	if _, err := v.SetDecisionLimits(ctx, &three, &day); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	for i, at := range []time.Time{old, now, now, now, now} {
		if err := v.RecordDecision(ctx, testRecord(fmt.Sprint("d", i), wire.Deny, at)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			// The old one went by age when the second was recorded.
			if got := recordedIDs(t, v, DecisionQuery{}); !slices.Equal(got, []string{"d1"}) {
				t.Fatalf("after two, kept %v, want [d1]", got)
			}
		}
	}
	if got := recordedIDs(t, v, DecisionQuery{}); !slices.Equal(got, []string{"d2", "d3", "d4"}) {
		t.Fatalf("kept %v, want the newest three", got)
	}
	page, err := v.Decisions(ctx, DecisionQuery{Limit: 2})
	if err != nil || len(page.Records) != 2 || page.Next == 0 {
		t.Fatalf("first page %+v %v", page, err)
	}
	if got := recordedIDs(t, v, DecisionQuery{AfterID: page.Next, Limit: 2}); !slices.Equal(got, []string{"d4"}) {
		t.Errorf("second page %v", got)
	}
	if got := recordedIDs(t, v, DecisionQuery{Since: now.Add(time.Hour)}); len(got) != 0 {
		t.Errorf("since the future: %v", got)
	}
	// Lowering the limit applies at once; 0 records nothing.
	one, zero := int64(1), int64(0)
	if _, err := v.SetDecisionLimits(ctx, &one, nil); err != nil {
		t.Fatal(err)
	}
	if got := recordedIDs(t, v, DecisionQuery{}); !slices.Equal(got, []string{"d4"}) {
		t.Errorf("limit 1 kept %v", got)
	}
	if _, err := v.SetDecisionLimits(ctx, &zero, nil); err != nil {
		t.Fatal(err)
	}
	if err := v.RecordDecision(ctx, testRecord("d9", wire.Deny, now)); err != nil {
		t.Fatal(err)
	}
	if n, err := v.CountDecisions(ctx); err != nil || n != 0 {
		t.Errorf("limit 0 holds %d decisions %v", n, err)
	}
	if _, err := v.SetDecisionLimits(ctx, nil, func() *int64 { n := int64(-1); return &n }()); wire.CodeOf(err) != wire.CodeInvalidInput {
		t.Errorf("a negative limit: %v", err)
	}
	mustCheck(t, v)
}

// TestMigrateToDecisions opens a vault of schema version 4: it gets the
// decisions table with the default limits, and keeps its files.
func TestMigrateToDecisions(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	write(t, v, "/a", "1")
	v.Close()
	schemaV4(t, s.PathOf("t"))
	v, err := s.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var ver int
	if err := v.rdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&ver); err != nil || ver != schemaVersion {
		t.Fatalf("schema version %d %v", ver, err)
	}
	if lim, err := v.DecisionLimits(ctx); err != nil || lim != DefaultDecisionLimits() {
		t.Fatalf("limits %+v %v", lim, err)
	}
	if err := v.RecordDecision(ctx, testRecord("d1", wire.Deny, time.Now())); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "/a"); got != "1" {
		t.Errorf("/a = %q", got)
	}
	mustCheck(t, v)
}

// A row whose input cannot be read back is an integrity error naming it.
func TestDamagedDecision(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	if err := v.RecordDecision(ctx, testRecord("d1", wire.Deny, time.Now())); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"UPDATE decisions SET input = x'00ff'", "UPDATE decisions SET input_format = 'json+zstd'"} {
		if _, err := v.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
		_, err := v.Decisions(ctx, DecisionQuery{})
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeIntegrity || we.Details["decision_id"] != "d1" {
			t.Errorf("%s: %v", q, err)
		}
	}
}
