package runner

import (
	"context"
	"fmt"

	"avfs/engine"
	"avfs/vault"
	"avfs/wire"
)

// Precheck is what Exec would decide about a request, found without
// running anything (see Runner.Precheck).
type Precheck struct {
	Decision wire.Decision
	Reasons  []wire.Reason
	Bundles  []wire.BundleInfo
	Vault    string // the vault's name
	// DecisionID is the id the decision is recorded under in the vault
	// (see recordDecision).
	DecisionID string
	// Approval, for require_approval, is the approval of exactly this run
	// (bound to the same digest Exec computes): a granted one when there
	// is one, else a pending one, created when there was none. nil for
	// every other decision.
	Approval *vault.Approval
}

// Precheck decides req as Exec would — the same vault, sandbox view,
// parse, policy and approval digest — and never runs, checkpoints or
// mounts anything. It is the decision of a hook that then rewrites the
// command to run through Exec (which decides again: Precheck is advice,
// Exec the authority).
//
// For require_approval it finds the approval bound to this run's digest:
// a granted one whose grant verifies (so that `--approval ID` will be
// accepted), else a pending one, else it creates a pending one exactly as
// Exec does, with req.ApprovalTTL (DefaultTTL when 0). req.ApprovalID is
// ignored. Errors (a vault that cannot be opened, a policy that does not
// load, a command that does not parse, a decision that cannot be
// recorded) are returned: the caller fails closed. The decision is
// recorded in the vault (see recordDecision). The vault is opened
// (created if missing) like Exec's.
func (r *Runner) Precheck(ctx context.Context, req Request) (Precheck, error) {
	req.ApprovalID = ""
	x := &execution{r: r, req: req, out: newEnvelope(req)}
	defer x.release(context.WithoutCancel(ctx))
	if err := x.check(ctx); err != nil {
		return Precheck{}, err
	}
	if err := x.open(ctx); err != nil {
		return Precheck{}, err
	}
	req, v, cwd := x.req, x.v, x.cwd
	p, err := x.policy()
	if err != nil {
		return Precheck{}, fmt.Errorf("load policy: %w", err)
	}
	input, err := x.parse(ctx, p.Programs())
	if err != nil {
		return Precheck{}, fmt.Errorf("parse command: %w", err)
	}
	res, err := p.Decide(ctx, input, engine.DecideOptions{})
	if err != nil {
		return Precheck{}, err
	}
	id, err := x.recordDecision(ctx, input, res, wire.SourcePrecheck)
	if err != nil {
		return Precheck{}, err
	}
	out := Precheck{Decision: res.Decision, Reasons: res.Reasons, Bundles: res.Bundles, Vault: x.info.Name, DecisionID: id}
	if res.Decision != wire.RequireApproval {
		return out, nil
	}
	digest := r.digest(req, cwd, x.info.Name, res.Bundles, x.view.input.Mode)
	all, err := v.Approvals(ctx, "")
	if err != nil {
		return Precheck{}, err
	}
	var pending *vault.Approval
	for i := range all {
		a := all[i]
		if a.Digest != digest {
			continue
		}
		if a.Status == vault.ApprovalGranted && r.checkGrant(a) == nil {
			out.Approval = &a
			return out, nil
		}
		if a.Status == vault.ApprovalPending && pending == nil {
			pending = &a
		}
	}
	if pending != nil {
		out.Approval = pending
		return out, nil
	}
	a, err := x.createApproval(ctx, res, digest)
	if err != nil {
		return Precheck{}, err
	}
	out.Approval = &a
	return out, nil
}
