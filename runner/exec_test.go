package runner

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"avfs/bundles"
	"avfs/engine"
	"avfs/vault"
	"avfs/wire"
)

// newTestRunner is a runner of the default policy over a store of its own,
// without a sandbox.
func newTestRunner(t *testing.T) *Runner {
	t.Helper()
	return &Runner{Store: vault.NewStore(t.TempDir(), vault.Options{Actor: "test"}), RunDir: t.TempDir(), TempDir: t.TempDir(),
		Sandbox: SandboxConfig{Mode: SandboxNone}, HostEnv: []string{"PATH=/usr/bin:/bin"},
		LoadPolicy: func(ctx context.Context) (*engine.Policy, error) {
			set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true})
			if err != nil {
				return nil, err
			}
			return engine.NewPolicy(ctx, set, engine.PolicyOptions{})
		}}
}

// writeRequest is a request whose command writes the vault: the default
// policy allows it with a checkpoint.
func writeRequest(env ...string) Request {
	return Request{Vault: "default", Shell: "echo hi > a.txt", Cwd: "/", Timeout: DefaultTimeout, Env: env,
		MountMode: ModeMaterialize, AllowWritableTrust: true}
}

// checkpoints lists the checkpoints of r's default vault.
func checkpoints(t *testing.T, r *Runner) []vault.Checkpoint {
	t.Helper()
	ctx := context.Background()
	v, err := r.Store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cps, err := v.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

func reasonsOf(env *wire.Envelope) []string { return reasonIDs(env.Policy.Reasons) }

// A NUL byte in a variable the command would get fails the run in its
// request stage: invalid_input naming the entry, before the decision, with
// no checkpoint taken and nothing mounted.
func TestExecEnvNUL(t *testing.T) {
	cases := []struct {
		name       string
		extra      []string // proxy.env
		env        []string // --env
		host       []string // more of the host's environment
		key, entry string   // the error's details
	}{
		{name: "proxy.env value", extra: []string{"OK=1", "BAD=a\x00b"}, key: "proxy.env", entry: "BAD"},
		{name: "proxy.env name", extra: []string{"B\x00D=1"}, key: "proxy.env", entry: `B\0D`},
		{name: "--env value", env: []string{"TOKEN=x\x00"}, key: "--env", entry: "TOKEN"},
		{name: "--env KEY from the host", env: []string{"FROM_HOST"}, host: []string{"FROM_HOST=a\x00b"}, key: "--env", entry: "FROM_HOST"},
		{name: "host allow-list", host: []string{"LANG=C\x00"}, key: "host environment", entry: "LANG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRunner(t)
			r.ExtraEnv = c.extra
			r.HostEnv = append(r.HostEnv, c.host...)
			env, status := r.Exec(context.Background(), writeRequest(c.env...))
			e := env.Error
			if status != wire.ExitAvfsFailed || e == nil || e.Code != wire.CodeInvalidInput || e.Details["key"] != c.key || e.Details["env"] != c.entry ||
				!strings.Contains(e.Message, "NUL") {
				t.Fatalf("status %d error %+v", status, e)
			}
			if strings.Contains(e.Message, "\x00") {
				t.Errorf("the message holds the NUL: %q", e.Message)
			}
			if env.Checkpoint != nil || env.Mount != nil || env.Process != nil || env.Decision != wire.Deny || len(env.Policy.Reasons) != 0 {
				t.Fatalf("not stopped before the decision: %+v", env)
			}
			if _, err := os.Stat(r.Store.PathOf("default")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the vault was opened (or made): %v", err)
			}
			if ents, _ := os.ReadDir(r.RunDir); len(ents) != 0 {
				t.Errorf("run directories: %v", ents)
			}
		})
	}
	// Entries avfs never passes are not looked at; a clean environment runs.
	r := newTestRunner(t)
	r.ExtraEnv = []string{"=x\x00", "AVFS_APPROVER_KEY=k\x00", "GOOD=1"}
	env, status := r.Exec(context.Background(), writeRequest("ALSO=2"))
	if status != 0 || env.Error != nil || env.Checkpoint == nil {
		t.Fatalf("clean run: %d %+v", status, env.Error)
	}
	if cps := checkpoints(t, r); len(cps) != 1 {
		t.Fatalf("checkpoints %+v", cps)
	}
}

// A stage that fails after the policy decided reports the decision made
// and its reasons with the error; one that fails before reports deny with
// no reasons (newEnvelope's not-decided envelope). The failures are fakes
// put in the stage's place: a real one (a mount that fails once the
// checkpoint is taken) is hard to provoke. A run that fails before its
// command started (mount, run) leaves no checkpoint, and its envelope says
// none; one that fails after keeps it.
func TestExecFailureKeepsTheDecision(t *testing.T) {
	cases := []struct {
		stage       string
		code        wire.Code
		decision    wire.Decision
		reasons     []string
		checkpoints int
	}{
		{"request", wire.CodeInvalidInput, wire.Deny, nil, 0},
		{"lock", wire.CodeVaultBusy, wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}, 0},
		{"mount", wire.CodeHostIO, wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}, 0},
		{"run", wire.CodeSandbox, wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}, 0},
		{"summary", wire.CodeInternal, wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}, 1},
	}
	for _, c := range cases {
		t.Run(c.stage, func(t *testing.T) {
			ctx := context.Background()
			r := newTestRunner(t)
			req := writeRequest()
			out := newEnvelope(req)
			x := &execution{r: r, req: req, out: out}
			stages := x.stages()
			i := slices.IndexFunc(stages, func(s stage) bool { return s.name == c.stage })
			if i < 0 {
				t.Fatalf("no stage %s", c.stage)
			}
			stages[i].run = func(context.Context) error { return wire.Errorf(c.code, "fake %s failure", c.stage) }
			status := x.through(ctx, stages)
			x.release(ctx)
			if status != wire.ExitAvfsFailed || out.Error == nil || out.Error.Code != c.code || out.Error.Message != "proxy exec: "+c.stage+": fake "+c.stage+" failure" {
				t.Fatalf("status %d error %+v", status, out.Error)
			}
			if out.Decision != c.decision || !slices.Equal(reasonsOf(out), c.reasons) || out.Policy.Reasons == nil {
				t.Fatalf("decision %s reasons %v, want %s %v", out.Decision, reasonsOf(out), c.decision, c.reasons)
			}
			if c.decision != wire.Deny && len(out.Policy.Bundles) == 0 {
				t.Errorf("no bundles: %+v", out.Policy)
			}
			if c.checkpoints > 0 {
				if cps := checkpoints(t, r); len(cps) != c.checkpoints || out.Checkpoint == nil || out.Checkpoint.ID != cps[0].ID {
					t.Fatalf("checkpoints %+v, envelope's %+v", cps, out.Checkpoint)
				}
			} else if c.stage != "request" {
				if cps := checkpoints(t, r); len(cps) != 0 || out.Checkpoint != nil {
					t.Fatalf("checkpoints %+v, envelope's %+v: want none", cps, out.Checkpoint)
				}
			}
		})
	}
}
