package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"avfs/engine"
	"avfs/vault"
	"avfs/wire"
)

// Recording decisions
//
// Every decision the policy makes about a run — Exec's decide stage and
// Precheck, and so proxy exec, the hooks, the MCP server and avfs serve,
// which all go through them — is recorded in the vault the run is for
// (vault.RecordDecision): its decision id, the source (Request.Source),
// the command, the decision, its reason ids and bundles, and the input
// document, so that `avfs policy replay` can ask another bundle about the
// same inputs. A run whose command did not parse, or whose policy did not
// load, is denied without a decision of the policy: it has no input (or
// no bundles) to replay, and is not recorded. Dry runs (`avfs policy
// eval`, POST /v1/decide) record nothing.
//
// Each such decision is also handed to Runner.DecisionLog, when set (a
// decision log: see DecisionLogger), under the same decision id, before
// it is recorded: the id joins the vault's record, the envelope, the run's
// audit row (its details' decision_id) and the decision log's event. A
// decision the log does not take is still recorded and acted on: the log
// never changes a decision nor holds a run up.
//
// A decision that cannot be recorded (a full disk, a busy vault) fails the
// run after the decision (exit 125, the decision reported as made): avfs
// does not run what it could not record, and a deny stays a deny. A
// Precheck returns the error, and its caller fails closed.

// DecisionLogger takes the policy's decisions to a decision log, beside
// the vault's record of them (manage.DecisionLog: OPA's decision-log
// plugin, configured by OPA's configuration file).
//
// LogDecision is given the decision's id (the envelope's decision_id),
// the way the request came in, the input document the policy saw and the
// policy's result (its bundles and their revisions included). It must not
// wait for the network (buffer, and upload elsewhere) and must not keep
// input or result past the call unless it copies them; it is called
// concurrently by concurrent runs. Its error is ignored: a decision that
// is not logged stands, and the logger reports its own failures.
type DecisionLogger interface {
	LogDecision(ctx context.Context, id string, source wire.DecisionSource, input *wire.Input, result wire.PolicyResult) error
}

// NewDecisionID returns a new decision id: a random UUID (version 4), the
// form OPA's decision logs use for theirs.
func NewDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// recordDecision records in the run's vault the decision res the policy
// made for input, under a new decision id, which it returns. The source is
// the request's (def when it has none).
func (x *execution) recordDecision(ctx context.Context, input *wire.Input, res wire.PolicyResult, def wire.DecisionSource) (string, error) {
	source := x.req.Source
	if source == "" {
		source = def
	}
	command := x.req.Shell
	if command == "" {
		command = engine.QuoteArgv(x.req.Argv)
	}
	id := NewDecisionID()
	if l := x.r.DecisionLog; l != nil {
		_ = l.LogDecision(ctx, id, source, input, res) // never changes the decision (see DecisionLogger)
	}
	err := x.v.RecordDecision(ctx, vault.DecisionRecord{DecisionID: id, Source: source, Command: command,
		Decision: res.Decision, Reasons: reasonIDs(res.Reasons), Bundles: res.Bundles, Input: input})
	if err != nil {
		return "", fmt.Errorf("record the decision: %w", err)
	}
	return id, nil
}
