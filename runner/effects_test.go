package runner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/bundles"
	"avfs/engine"
	"avfs/vault"
	"avfs/wire"
)

// extensionRunner is newTestRunner with the default bundle and an
// extension bundle extensions.NAME whose Rego module is body.
func extensionRunner(t *testing.T, name, body string) *Runner {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		".manifest":    `{"revision": "` + name + `-1", "roots": ["extensions/` + name + `"]}`,
		name + ".rego": "package extensions." + name + "\n\n" + body,
	}
	for file, text := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newTestRunner(t)
	r.LoadPolicy = func(ctx context.Context) (*engine.Policy, error) {
		set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true, Paths: []string{dir}})
		if err != nil {
			return nil, err
		}
		return engine.NewPolicy(ctx, set, engine.PolicyOptions{})
	}
	return r
}

// effectsRunner is newTestRunner with an extension whose effects rules
// deny any change to /secret* and hold any change to /review*.
func effectsRunner(t *testing.T) *Runner {
	t.Helper()
	return extensionRunner(t, "fx", `effects_reasons contains {"id": "fx.deny.secret", "message": c.path, "decision": "deny"} if {
	some c in input.changes
	startswith(c.path, "/secret")
}

effects_reasons contains {"id": "fx.hold.review", "message": c.path, "decision": "require_approval"} if {
	some c in input.changes
	startswith(c.path, "/review")
}
`)
}

// shellRun runs script in r's default vault (materialised, no sandbox).
func shellRun(t *testing.T, r *Runner, script string) (*wire.Envelope, int) {
	t.Helper()
	return r.Exec(context.Background(), Request{Vault: "default", Shell: script, Cwd: "/", Timeout: DefaultTimeout,
		MountMode: ModeMaterialize, AllowWritableTrust: true, ApprovalTTL: 3600e9})
}

// tree reads every entry of r's default vault: path -> kind, mode and content.
func tree(t *testing.T, r *Runner) map[string]string {
	t.Helper()
	ctx := context.Background()
	v, err := r.Store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	out := map[string]string{}
	if err := v.Walk(ctx, "/", func(e vault.Entry) error {
		s := e.Kind.String() + " " + e.Mode.String()
		if e.Kind == vault.KindFile {
			var b strings.Builder
			if _, err := v.ReadFile(ctx, e.Path, &b); err != nil {
				return err
			}
			s += " " + b.String()
		}
		out[e.Path] = s
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := v.Check(ctx)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("vault check: %v %+v", err, rep.Problems)
	}
	return out
}

func sameEntries(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		if b[k] != x {
			return false
		}
	}
	return true
}

const seed = `mkdir -p src && printf 'one\ntwo\n' > src/a.txt && printf 'old' > src/b.txt && echo keep > keep.txt`

// The run's changes as the effects policy sees them and decides: kept.
func TestEffectsKept(t *testing.T) {
	r := effectsRunner(t)
	shellRun(t, r, seed)
	env, status := shellRun(t, r, `printf 'one\nTWO\nthree\n' > src/a.txt && rm src/b.txt && echo new > src/c.txt`)
	if status != 0 || env.Effects == nil || env.Effects.Outcome != wire.EffectsKept || env.Effects.Decision != wire.Allow {
		t.Fatalf("status %d, effects %+v, error %+v", status, env.Effects, env.Error)
	}
	if !slices.Equal(reasonIDs(env.Effects.Reasons), []string{"avfs.effects.keep"}) || env.Effects.Held != nil {
		t.Errorf("effects %+v", env.Effects)
	}
	if got := tree(t, r); got["/src/c.txt"] != "file 0644 new\n" || got["/src/b.txt"] != "" {
		t.Errorf("tree %v", got)
	}
}

// A denied run's changes are undone, byte for byte: the vault is as it
// was before the run, and the envelope lists what was undone.
func TestEffectsDenyUndoes(t *testing.T) {
	r := effectsRunner(t)
	shellRun(t, r, seed)
	before := tree(t, r)
	env, status := shellRun(t, r, `printf 'x' > src/a.txt && rm src/b.txt && mkdir -p d/e && echo s > secret.txt && chmod 600 keep.txt`)
	if status != wire.ExitNotRun || env.Effects == nil || env.Effects.Outcome != wire.EffectsUndone || env.Effects.Decision != wire.Deny {
		t.Fatalf("status %d, effects %+v, error %+v", status, env.Effects, env.Error)
	}
	if !slices.Contains(reasonIDs(env.Effects.Reasons), "fx.deny.secret") || env.ChangesTotal != 6 {
		t.Errorf("effects %+v, %d changes: %+v", env.Effects, env.ChangesTotal, env.Changes)
	}
	if env.Process == nil || env.Process.ExitCode != 0 {
		t.Errorf("process %+v: the command ran", env.Process)
	}
	if got := tree(t, r); !sameEntries(got, before) {
		t.Fatalf("after the undo:\n%v\nwant\n%v", got, before)
	}
}

// Held changes: the vault stays as before until the approval is granted,
// which applies exactly what the run wrote, without running it again;
// denying discards them; a vault that moved meanwhile is a conflict.
func TestEffectsHeld(t *testing.T) {
	ctx := context.Background()
	const change = `echo reviewed > review.txt && printf 'y' > src/a.txt && mkdir -p .git/hooks && printf '#!/bin/sh\nexit 0\n' > .git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit`
	hold := func(t *testing.T, r *Runner) (*wire.Envelope, map[string]string) {
		t.Helper()
		shellRun(t, r, seed)
		before := tree(t, r)
		env, status := shellRun(t, r, change)
		if status != wire.ExitNotRun || env.Effects == nil || env.Effects.Outcome != wire.EffectsHeld || env.Approval == nil || env.Effects.Held == nil {
			t.Fatalf("status %d, effects %+v, approval %+v, error %+v", status, env.Effects, env.Approval, env.Error)
		}
		ids := reasonIDs(env.Effects.Reasons)
		if !slices.Contains(ids, "fx.hold.review") || !slices.Contains(ids, "avfs.effects.protected_path") {
			t.Errorf("reasons %v", ids)
		}
		if got := tree(t, r); !sameEntries(got, before) {
			t.Fatalf("held changes reached the vault: %v", got)
		}
		return env, before
	}
	withVault := func(t *testing.T, r *Runner, f func(v *vault.Vault)) {
		v, err := r.Store.Open(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		f(v)
	}
	t.Run("granted", func(t *testing.T) {
		r := effectsRunner(t)
		env, _ := hold(t, r)
		withVault(t, r, func(v *vault.Vault) {
			if _, err := v.DecideApproval(ctx, env.Approval.ID, true, "", "test", ""); err != nil {
				t.Fatal(err)
			}
			res, err := v.ApplyHeld(ctx, env.Approval.ID, r.checkGrant)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changes) != env.ChangesTotal {
				t.Errorf("applied %d changes, the run made %d", len(res.Changes), env.ChangesTotal)
			}
		})
		got := tree(t, r)
		if got["/review.txt"] != "file 0644 reviewed\n" || got["/.git/hooks/pre-commit"] != "file 0755 #!/bin/sh\nexit 0\n" || got["/src/a.txt"] != "file 0644 y" {
			t.Errorf("after the grant: %v", got)
		}
		if cps := checkpoints(t, r); slices.ContainsFunc(cps, func(c vault.Checkpoint) bool {
			return strings.HasPrefix(c.Name, "held-") || strings.HasPrefix(c.Name, "base-")
		}) {
			t.Errorf("held checkpoints left: %+v", cps)
		}
	})
	t.Run("denied", func(t *testing.T) {
		r := effectsRunner(t)
		env, before := hold(t, r)
		withVault(t, r, func(v *vault.Vault) {
			if _, err := v.DecideApproval(ctx, env.Approval.ID, false, "no", "test", ""); err != nil {
				t.Fatal(err)
			}
		})
		if got := tree(t, r); !sameEntries(got, before) {
			t.Errorf("after the deny: %v", got)
		}
		if cps := checkpoints(t, r); slices.ContainsFunc(cps, func(c vault.Checkpoint) bool { return c.Name == env.Effects.Held.Name }) {
			t.Errorf("held checkpoint left: %+v", cps)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		r := effectsRunner(t)
		env, _ := hold(t, r)
		if _, status := shellRun(t, r, `echo meanwhile > src/a.txt`); status != 0 {
			t.Fatalf("second run: %d", status)
		}
		moved := tree(t, r)
		withVault(t, r, func(v *vault.Vault) {
			if _, err := v.DecideApproval(ctx, env.Approval.ID, true, "", "test", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := v.ApplyHeld(ctx, env.Approval.ID, nil); !wire.HasCode(err, wire.CodeConflict) {
				t.Fatalf("apply after the vault moved: %v", err)
			}
		})
		if got := tree(t, r); !sameEntries(got, moved) {
			t.Errorf("a refused apply changed the vault: %v", got)
		}
	})
}

// What the effects policy reads: content hashes, line counts, totals.
func TestEffectsInput(t *testing.T) {
	r := newTestRunner(t)
	shellRun(t, r, seed)
	ctx := context.Background()
	v, err := r.Store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	m, err := v.Mark(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{"/src/a.txt": "one\nTWO\nthree\n", "/bin.dat": "\x00\x01\x02"} {
		if _, err := v.WriteFile(ctx, p, strings.NewReader(text), vault.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Remove(ctx, "/src/b.txt", false); err != nil {
		t.Fatal(err)
	}
	x := &execution{r: r, v: v, mark: &m, input: &wire.Input{}, res: wire.PolicyResult{Decision: wire.AllowWithCheckpoint}}
	in, err := x.effectsInput(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.Totals != (wire.EffectsTotals{Files: 3, BytesWritten: 17, Deleted: 1}) || len(in.Changes) != 3 {
		t.Fatalf("totals %+v, changes %+v", in.Totals, in.Changes)
	}
	byPath := map[string]wire.EffectsChange{}
	for _, c := range in.Changes {
		byPath[c.Path] = c
	}
	a := byPath["/src/a.txt"]
	if a.LinesAdded == nil || *a.LinesAdded != 2 || *a.LinesRemoved != 1 || !strings.HasPrefix(a.ContentHash, "sha256:") {
		t.Errorf("a.txt: %+v", a)
	}
	if b := byPath["/bin.dat"]; b.LinesAdded != nil || b.ContentHash == "" {
		t.Errorf("bin.dat: %+v", b)
	}
	if d := byPath["/src/b.txt"]; d.Op != "deleted" || d.ContentHash != "" || d.LinesRemoved == nil || *d.LinesRemoved != 1 {
		t.Errorf("b.txt: %+v", d)
	}
}

// A merge's change set goes through the effects policy: a fork that adds
// a git hook is refused whole (effects_denied, nothing applied); one with
// ordinary changes merges.
func TestApproveMerge(t *testing.T) {
	ctx := context.Background()
	r := effectsRunner(t)
	shellRun(t, r, seed)
	p, err := r.LoadPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fork := func(name string, files map[string]string) {
		t.Helper()
		fv, err := r.Store.Fork(ctx, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		defer fv.Close()
		for path, text := range files {
			if _, err := fv.WriteFile(ctx, path, strings.NewReader(text), vault.WriteOptions{Parents: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	merge := func(name string) error {
		_, err := r.Store.Merge(ctx, name, vault.MergeOptions{Approve: func(ctx context.Context, cs []vault.Change) error {
			return ApproveMerge(ctx, p, name, cs)
		}})
		return err
	}
	before := tree(t, r)
	fork("hooked", map[string]string{"/.git/hooks/pre-commit": "#!/bin/sh\n", "/src/new.txt": "x\n"})
	if err := merge("hooked"); !wire.HasCode(err, wire.CodeEffectsDenied) || !strings.Contains(err.Error(), "avfs.effects.protected_path") {
		t.Fatalf("merge of a hook: %v", err)
	}
	if got := tree(t, r); !sameEntries(got, before) {
		t.Fatalf("a refused merge changed the vault: %v", got)
	}
	fork("plain", map[string]string{"/src/new.txt": "x\n"})
	if err := merge("plain"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, r); got["/src/new.txt"] != "file 0644 x\n" {
		t.Fatalf("after the merge: %v", got)
	}
}
