// Package manage runs avfs's policy under OPA's management plugins, built
// from OPA's own configuration file (services, bundles, decision_logs,
// status): what an OPA deployment already configures works for avfs
// unchanged.
package manage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"

	"avfs/engine"
	"avfs/wire"
)

// DecisionPath is the path decision-log events of avfs carry: the policy's
// entry point (engine.Entrypoint, data.avfs.decision) written as OPA writes
// the paths of its own decisions.
var DecisionPath = strings.ReplaceAll(strings.TrimPrefix(engine.Entrypoint, "data."), ".", "/")

// DecisionLog sends avfs's policy decisions to OPA's decision-log plugin
// (the decision_logs section of OPA's configuration file), so that they
// reach the same log service, with the same masking, dropping, batching,
// retries and bounds, as the decisions of an OPA server. It satisfies
// runner.DecisionLogger.
type DecisionLog struct {
	pm *plugins.Manager
}

// NewDecisionLog returns the decision log of pm: nil when pm is nil or its
// configuration has no decision_logs (no decision-log plugin is
// registered), so that a Runner without one logs nothing. The plugin is
// looked up on each decision, so a reconfiguration of the manager is
// followed.
func NewDecisionLog(pm *plugins.Manager) *DecisionLog {
	if pm == nil || logs.Lookup(pm) == nil {
		return nil
	}
	return &DecisionLog{pm: pm}
}

// LogDecision hands one decision of the policy to the decision-log plugin
// as an OPA event: decision_id id, path DecisionPath, input the document
// the policy saw, result the policy's result (without its trace), bundles
// the revisions that decided, timestamp now, custom.source the way the
// request came into avfs; the plugin adds the manager's labels (id,
// version and the configuration's labels), applies the drop and mask
// policies (data.system.log.drop and data.system.log.mask in the
// manager's compiler), and buffers the event for upload.
//
// It never uploads or waits for the network: the plugin's buffer (its
// reporting.buffer_* options, oldest events dropped when full) and its
// upload loop (batches, retries with backoff) do that. It blocks only
// while the plugin is being reconfigured, as OPA's own decisions do.
//
// Failure modes: an event that cannot be encoded, a mask or drop policy
// that fails, or a plugin gone after a reconfiguration: the error is
// returned (and logged through the manager's logger) and nothing is
// buffered. A failed log never changes a decision: callers report or
// ignore the error, never deny because of it.
//
// Concurrency: safe for concurrent use, as the plugin is. A nil
// *DecisionLog logs nothing and returns nil.
func (d *DecisionLog) LogDecision(ctx context.Context, id string, source wire.DecisionSource, input *wire.Input, result wire.PolicyResult) error {
	if d == nil {
		return nil
	}
	p := logs.Lookup(d.pm)
	if p == nil {
		return fmt.Errorf("decision log: no decision_logs plugin on the manager")
	}
	info, err := decisionInfo(id, source, input, result, time.Now().UTC())
	if err != nil {
		d.pm.Logger().Error("decision log: %v", err)
		return fmt.Errorf("decision log: %w", err)
	}
	if err := p.Log(ctx, info); err != nil {
		d.pm.Logger().Error("decision log: %v", err)
		return fmt.Errorf("decision log: %w", err)
	}
	return nil
}

// decisionInfo is the event of one decision as OPA's server describes its
// own to the plugin. Input and result are plain JSON values (maps,
// slices), as the plugin's masks expect.
func decisionInfo(id string, source wire.DecisionSource, input *wire.Input, result wire.PolicyResult, now time.Time) (*server.Info, error) {
	in, err := asJSON(input)
	if err != nil {
		return nil, fmt.Errorf("encode the input: %w", err)
	}
	result.Trace = nil // explain traces are for the caller, not the log
	res, err := asJSON(result)
	if err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	bundles := make(map[string]server.BundleInfo, len(result.Bundles))
	for _, b := range result.Bundles {
		bundles[b.Name] = server.BundleInfo{Revision: b.Revision}
	}
	// The input as the drop and mask policies see it, made here from the
	// plain value (as OPA's server hands over the AST it evaluated):
	// the plugin then need not copy the input again to make it.
	inAST, err := ast.InterfaceToValue(in)
	if err != nil {
		return nil, fmt.Errorf("encode the input: %w", err)
	}
	return &server.Info{DecisionID: id, Path: DecisionPath, Input: &in, InputAST: inAST, Results: &res, Bundles: bundles, Timestamp: now,
		Custom: map[string]any{"source": string(source)}}, nil
}

// asJSON is v as a plain JSON value.
func asJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}
