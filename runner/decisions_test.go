package runner

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// recorded returns the decisions recorded in r's default vault.
func recorded(t *testing.T, r *Runner) []vault.DecisionRecord {
	t.Helper()
	ctx := context.Background()
	v, err := r.Store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	page, err := v.Decisions(ctx, vault.DecisionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return page.Records
}

// Every decision of the policy is recorded in the vault, with the id the
// envelope (or the precheck) gives, its source, the command and the input
// the policy saw; a run that failed before the policy decided records
// nothing and has no decision id.
func TestRecordDecisions(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t)
	denied := Request{Vault: "default", Argv: []string{"cat", "/etc/shadow"}, Cwd: "/", Timeout: DefaultTimeout, AllowWritableTrust: true}
	env, status := r.Exec(ctx, denied)
	if status != wire.ExitNotRun || env.Decision != wire.Deny || !uuidPattern.MatchString(env.DecisionID) {
		t.Fatalf("status %d decision %s id %q", status, env.Decision, env.DecisionID)
	}
	hooked := Request{Vault: "default", Shell: "echo hi > a.txt", Cwd: "/", Timeout: DefaultTimeout, Source: wire.SourceHook}
	pc, err := r.Precheck(ctx, hooked)
	if err != nil || pc.Decision != wire.AllowWithCheckpoint || !uuidPattern.MatchString(pc.DecisionID) {
		t.Fatalf("precheck %+v %v", pc, err)
	}
	plain := hooked
	plain.Source = ""
	pc2, err := r.Precheck(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	bad := denied
	bad.Cwd = "../x"
	if env, _ := r.Exec(ctx, bad); env.DecisionID != "" || env.Error == nil {
		t.Fatalf("a run that failed before deciding: id %q error %+v", env.DecisionID, env.Error)
	}
	recs := recorded(t, r)
	type row struct {
		id       string
		source   wire.DecisionSource
		command  string
		decision wire.Decision
		program  string
	}
	var got []row
	for _, rec := range recs {
		if rec.Vault != "default" || len(rec.Reasons) == 0 || len(rec.Bundles) == 0 || rec.Input == nil || len(rec.Input.Commands) == 0 {
			t.Fatalf("record %+v", rec)
		}
		got = append(got, row{rec.DecisionID, rec.Source, rec.Command, rec.Decision, rec.Input.Commands[0].Program})
	}
	want := []row{
		{env.DecisionID, wire.SourceExec, "cat /etc/shadow", wire.Deny, "cat"},
		{pc.DecisionID, wire.SourceHook, "echo hi > a.txt", wire.AllowWithCheckpoint, "echo"},
		{pc2.DecisionID, wire.SourcePrecheck, "echo hi > a.txt", wire.AllowWithCheckpoint, "echo"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded\n %+v\nwant\n %+v", got, want)
	}
}

// A decision that cannot be recorded fails the run after the decision:
// nothing runs, and the decision reported is the one made (a deny stays
// a deny). A precheck returns the error.
func TestRecordDecisionFails(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t)
	v, err := r.Store.OpenOrCreate(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	path := v.Path()
	v.Close()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TRIGGER refuse BEFORE INSERT ON decisions BEGIN SELECT RAISE(FAIL, 'refused'); END"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cases := []struct {
		req  Request
		want wire.Decision
	}{
		{Request{Vault: "default", Argv: []string{"cat", "/etc/shadow"}, Cwd: "/", Timeout: DefaultTimeout, AllowWritableTrust: true}, wire.Deny},
		{writeRequest(), wire.AllowWithCheckpoint},
	}
	for _, c := range cases {
		env, status := r.Exec(ctx, c.req)
		if status != wire.ExitAvfsFailed || env.Error == nil || env.Decision != c.want || env.DecisionID != "" || env.Process != nil || env.Checkpoint != nil {
			t.Errorf("%v: status %d decision %s id %q error %+v process %+v", c.req.Argv, status, env.Decision, env.DecisionID, env.Error, env.Process)
		}
	}
	if _, err := r.Precheck(ctx, writeRequest()); err == nil {
		t.Error("a precheck whose decision cannot be recorded succeeded")
	}
	if cps := checkpoints(t, r); len(cps) != 0 {
		t.Errorf("checkpoints %+v", cps)
	}
}
