package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/bundles"
	"avfs/wire"
)

// effectsBundle writes a bundle whose first decision allows everything
// and whose effects policy is the Rego body given ("" for none), and
// compiles it.
func effectsBundle(t *testing.T, body string) *Policy {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		".manifest":   `{"roots": ["avfs"], "revision": "effects-test"}`,
		"policy.rego": "package avfs\n\ndecision := {\"decision\": \"allow\", \"reasons\": []}\n",
	}
	if body != "" {
		files["effects.rego"] = "package avfs.effects\n\n" + body + "\n"
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return policyFor(t, bundles.Options{Paths: []string{dir}})
}

func size(n int64) *int64 { return &n }

// effectsInput is what a run of argv did: changes, exit code 0.
func effectsInput(argv []string, changes ...wire.EffectsChange) *wire.EffectsInput {
	in := &wire.EffectsInput{SchemaVersion: wire.EffectsInputSchemaVersion, Command: cmdInput(argv...), Decision: wire.AllowWithCheckpoint, Changes: changes}
	for _, c := range changes {
		in.Totals.Files++
		if c.Op == "deleted" {
			in.Totals.Deleted++
		} else if c.SizeAfter != nil {
			in.Totals.BytesWritten += *c.SizeAfter
		}
	}
	return in
}

// TestDefaultEffects: the default bundle's effects rules, through the
// engine (the Rego tests in tests/rego/effects_test.rego cover every rule).
func TestDefaultEffects(t *testing.T) {
	p := defaultP(t)
	if !p.HasEffects() {
		t.Fatal("the default bundle has no effects policy")
	}
	file := func(path, op, before, after string) wire.EffectsChange {
		return wire.EffectsChange{Path: path, Op: op, Kind: "file", SizeAfter: size(3), ModeBefore: before, ModeAfter: after}
	}
	tests := []struct {
		name    string
		in      *wire.EffectsInput
		want    wire.Decision
		reasons []string
	}{
		{"nothing", effectsInput([]string{"true"}), wire.Allow, []string{"avfs.effects.keep"}},
		{"source edit", effectsInput([]string{"sed", "-i", "s/a/b/", "x.c"}, file("/x.c", "modified", "0644", "0644")), wire.Allow, []string{"avfs.effects.keep"}},
		{"git hook", effectsInput([]string{"sh", "-c", "x"}, file("/.git/hooks/pre-push", "added", "", "0755")), wire.RequireApproval, []string{"avfs.effects.protected_path"}},
		{"git init", effectsInput([]string{"git", "init"},
			wire.EffectsChange{Path: "/.git", Op: "added", Kind: "dir", ModeAfter: "0755"}, file("/.git/config", "added", "", "0644")), wire.Allow, []string{"avfs.effects.keep"}},
		{"setuid", effectsInput([]string{"chmod", "u+s", "bin/x"}, file("/bin/x", "modified", "0755", "4755")), wire.RequireApproval, []string{"avfs.effects.setuid"}},
		{"empty fields", &wire.EffectsInput{Changes: []wire.EffectsChange{{Path: "/x"}}}, wire.Allow, []string{"avfs.effects.keep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.DecideEffects(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			ids := reasonIDs(res.Reasons)
			slices.Sort(ids)
			if res.Decision != tt.want || !slices.Equal(ids, tt.reasons) {
				t.Errorf("got %s %v, want %s %v", res.Decision, ids, tt.want, tt.reasons)
			}
			if res.Sandbox != (wire.SandboxGrant{}) || res.EvalUS <= 0 || len(res.Bundles) == 0 {
				t.Errorf("result %+v: an effects decision grants nothing and says which bundles decided", res)
			}
		})
	}
}

// TestEffectsFailClosed: an effects policy that errs, is undefined or
// badly shaped denies; a policy without one says so and denies if asked.
func TestEffectsFailClosed(t *testing.T) {
	tests := []struct {
		name, body, why string
	}{
		{"undefined", `decision := {"decision": "allow", "reasons": []} if input.nothing`, "is undefined"},
		{"not a decision", `decision := {"decision": "maybe", "reasons": []}`, `"maybe"`},
		{"runtime error", `decision := {"decision": "allow", "reasons": [], "x": to_number("x")}`, "to_number"},
		{"bad reasons", `decision := {"decision": "allow", "reasons": [1]}`, "reasons[0]"},
		{"none", "", "no rule defines the effects policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := effectsBundle(t, tt.body)
			if p.HasEffects() != (tt.body != "") {
				t.Fatalf("HasEffects = %v", p.HasEffects())
			}
			res, err := p.DecideEffects(context.Background(), effectsInput([]string{"true"}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision != wire.Deny || !IsFailClosed(res) || len(res.Reasons) != 1 || !strings.Contains(res.Reasons[0].Message, tt.why) {
				t.Fatalf("got %+v, want a fail-closed deny mentioning %q", res, tt.why)
			}
		})
	}
	t.Run("nil input", func(t *testing.T) {
		res, err := defaultP(t).DecideEffects(context.Background(), nil)
		if err != nil || res.Decision != wire.Deny || !IsFailClosed(res) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := defaultP(t).DecideEffects(ctx, effectsInput([]string{"true"}))
		if err != nil || res.Decision != wire.Deny || !IsFailClosed(res) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	t.Run("raised", func(t *testing.T) {
		p := effectsBundle(t, `decision := {"decision": "allow", "reasons": [{"id": "x", "message": "m", "decision": "require_approval"}]}`)
		res, err := p.DecideEffects(context.Background(), effectsInput([]string{"true"}))
		if err != nil || res.Decision != wire.RequireApproval || !slices.Contains(reasonIDs(res.Reasons), ReasonRaised) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
}

// TestEffectsInputValue: the policy sees the effects input as its JSON
// form, the first decision's input under command.
func TestEffectsInputValue(t *testing.T) {
	p := effectsBundle(t, `decision := {"decision": "allow", "reasons": [{"id": "seen", "decision": "allow", "message": json.marshal([input.command.command.program, input.changes[0].lines_added, input.totals.deleted, input.process.exit_code])}]}`)
	in := effectsInput([]string{"rm", "x"}, wire.EffectsChange{Path: "/x", Op: "deleted", Kind: "file", SizeBefore: size(1), ModeBefore: "0644"})
	res, err := p.DecideEffects(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reasons) != 1 || res.Reasons[0].Message != `["rm",null,1,0]` {
		t.Fatalf("got %+v", res.Reasons)
	}
}
