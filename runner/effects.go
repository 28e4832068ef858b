package runner

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"avfs/engine"
	"avfs/linediff"
	"avfs/vault"
	"avfs/wire"
)

// effects decides on what the run did, with the effects policy
// (engine.EffectsEntrypoint), and acts on the decision before the changes
// become the vault's for good: allow keeps them; deny returns the vault to
// the run's start (the mark, so the decision before the run needs no
// checkpoint); require_approval holds them behind two checkpoints
// (vault.HoldChanges) with a pending approval bound to exactly those
// changes: granting it applies them (vault.ApplyHeld), denying discards
// them. Undone or held changes make the run's exit status ExitNotRun.
//
// It runs only when the command ran and could change the vault (not
// --readonly) under a policy that has an effects entrypoint, unless the
// runner's SkipEffects turns it off. The decision
// fails closed like the first (deny: the changes are undone). A failure
// to undo or hold fails the run (the envelope lists the changes, which
// stay); nothing is ever applied that the policy did not allow.
func (x *execution) effects(ctx context.Context) error {
	if x.req.Readonly || x.mark == nil || !x.ran || x.r.SkipEffects {
		return nil
	}
	p, err := x.policy()
	if err != nil || !p.HasEffects() {
		return nil // the first decision could not have been made without it
	}
	ctx = context.WithoutCancel(ctx)
	start := time.Now()
	defer func() { x.out.Timing.EffectsMS = ms(time.Since(start)) }()
	in, err := x.effectsInput(ctx)
	if err != nil {
		return err
	}
	res, err := p.DecideEffects(ctx, in)
	if err != nil {
		return err
	}
	report := &wire.EffectsReport{Decision: res.Decision, Reasons: res.Reasons, Outcome: wire.EffectsKept, EvalUS: res.EvalUS}
	x.out.Effects = report
	switch res.Decision {
	case wire.Deny:
		undone, err := x.v.RestoreMark(ctx, *x.mark, "effects denied: "+x.out.ID)
		if err != nil {
			return fmt.Errorf("undo the run's changes: %w", err)
		}
		x.r.invalidate(ctx, x.info.Name, undone.Changes)
		report.Outcome = wire.EffectsUndone
		x.status = wire.ExitNotRun
	case wire.RequireApproval:
		if x.preview {
			// A preview's changes are in its fork already, held by nature:
			// previewApproval asks for them.
			report.Outcome = wire.EffectsHeld
			return nil
		}
		held, undone, err := x.v.HoldChanges(ctx, *x.mark, x.out.ID)
		if err != nil {
			return fmt.Errorf("hold the run's changes: %w", err)
		}
		x.r.invalidate(ctx, x.info.Name, undone.Changes)
		report.Outcome = wire.EffectsHeld
		report.Held = &wire.CheckpointRef{ID: held.Held.ID, Name: held.Held.Name}
		x.status = wire.ExitNotRun
		req := x.req
		a, err := x.v.CreateApproval(ctx, vault.ApprovalRequest{Argv: req.Argv, Shell: req.Shell, Cwd: x.cwd, Env: req.Env, Vault: x.info.Name,
			BundleRevision: revisions(res.Bundles), Reasons: reasonIDs(res.Reasons), Digest: x.digest, TTL: req.ApprovalTTL,
			Held: &vault.HeldRef{Held: held.Held.Name, Base: held.Base.Name}})
		if err != nil {
			return fmt.Errorf("ask approval for the held changes: %w", err)
		}
		x.out.Approval = &wire.ApprovalRef{ID: a.ID, Status: a.Status, ExpiresAt: a.ExpiresAt.UTC()}
	}
	return nil
}

// effectsInput is what the run did, as the effects policy reads it: every
// change since the run's mark (not only those the envelope lists) with its
// content hash and, for text files up to wire.EffectsLineDiffLimit, the
// lines added and removed.
func (x *execution) effectsInput(ctx context.Context) (*wire.EffectsInput, error) {
	pr := x.proc
	in := &wire.EffectsInput{
		SchemaVersion: wire.EffectsInputSchemaVersion,
		Command:       x.input,
		Decision:      x.res.Decision,
		Process:       wire.EffectsProcess{ExitCode: pr.ExitCode, Signal: processReport(pr).Signal, TimedOut: pr.TimedOut, DurationMS: pr.Duration.Milliseconds()},
		Changes:       []wire.EffectsChange{},
	}
	err := x.v.ChangesSinceContent(ctx, *x.mark, func(c vault.ContentChange) error {
		wc := wireChanges([]vault.Change{c.Change})[0]
		ec := wire.EffectsChange{Path: wc.Path, Op: wc.Op, Kind: wc.Kind, SizeBefore: wc.SizeBefore, SizeAfter: wc.SizeAfter,
			ModeBefore: wc.ModeBefore, ModeAfter: wc.ModeAfter}
		if c.After != nil {
			ec.ContentHash = c.After.ContentHash()
		}
		if c.Kind == vault.KindFile {
			added, removed, ok, err := lineCounts(c.Before, c.After)
			if err != nil {
				return err
			}
			if ok {
				ec.LinesAdded, ec.LinesRemoved = &added, &removed
			}
		}
		in.Changes = append(in.Changes, ec)
		in.Totals.Files++
		switch {
		case c.Op == "deleted":
			in.Totals.Deleted++
		case c.Kind == vault.KindFile && c.SizeAfter != nil:
			in.Totals.BytesWritten += *c.SizeAfter
		}
		return nil
	})
	return in, err
}

// lineCounts counts the lines a file gained and lost between its two
// sides (nil for a side that does not exist); ok is false when either
// side is larger than wire.EffectsLineDiffLimit or not text.
func lineCounts(before, after *vault.FileReader) (added, removed int, ok bool, err error) {
	var sides [2]string
	for i, r := range []*vault.FileReader{before, after} {
		if r == nil {
			continue
		}
		if r.Size() > wire.EffectsLineDiffLimit {
			return 0, 0, false, nil
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return 0, 0, false, err
		}
		if !textual(b) {
			return 0, 0, false, nil
		}
		sides[i] = string(b)
	}
	ca, cb := linediff.Compare(linediff.Split(sides[0]), linediff.Split(sides[1]))
	for _, d := range ca {
		if d {
			removed++
		}
	}
	for _, d := range cb {
		if d {
			added++
		}
	}
	return added, removed, true, nil
}

// ApproveMerge decides with the effects policy on the change set of a
// merge of fork (vault.MergeOptions.Approve): allow (or
// allow_with_checkpoint) lets it apply; deny or require_approval fails
// with effects_denied, details decision and reasons, so nothing is
// applied (a merge is not held: a person merges again once the policy
// allows, or merges with a policy that does). The input is that of a run
// of `avfs vault merge FORK` whose changes are the merge's, without
// content hashes or line counts (a merge copies content it does not
// read). A policy without HasEffects allows.
func ApproveMerge(ctx context.Context, p *engine.Policy, fork string, changes []vault.Change) error {
	if !p.HasEffects() {
		return nil
	}
	argv := []string{"avfs", "vault", "merge", fork}
	cmd := wire.Command{Argv: argv, Raw: strings.Join(argv, " "), Program: "avfs", Args: argv[1:], Flags: []string{}, FlagValues: map[string]string{},
		Operands: argv[1:], Wrappers: []wire.Wrapper{}, Assignments: map[string]string{}, Redirects: []wire.Redirect{}, Origin: "argv", PipelineLen: 1}
	in := &wire.EffectsInput{SchemaVersion: wire.EffectsInputSchemaVersion, Decision: wire.Allow, Changes: []wire.EffectsChange{},
		Command: &wire.Input{SchemaVersion: 1, Command: cmd, Commands: []wire.Command{cmd}, Paths: []wire.Path{}, Cwd: "/", Env: []string{}}}
	for _, wc := range wireChanges(changes) {
		in.Changes = append(in.Changes, wire.EffectsChange{Path: wc.Path, Op: wc.Op, Kind: wc.Kind, SizeBefore: wc.SizeBefore, SizeAfter: wc.SizeAfter,
			ModeBefore: wc.ModeBefore, ModeAfter: wc.ModeAfter})
		in.Totals.Files++
		switch {
		case wc.Op == "deleted":
			in.Totals.Deleted++
		case wc.Kind == "file" && wc.SizeAfter != nil:
			in.Totals.BytesWritten += *wc.SizeAfter
		}
	}
	res, err := p.DecideEffects(ctx, in)
	if err != nil {
		return err
	}
	if res.Decision == wire.Allow || res.Decision == wire.AllowWithCheckpoint {
		return nil
	}
	ids := reasonIDs(res.Reasons)
	return wire.Errorf(wire.CodeEffectsDenied, "the effects policy decided %s on merging %q (%s): nothing was applied", res.Decision, fork, strings.Join(ids, ", ")).
		With("decision", res.Decision).With("reasons", ids)
}
