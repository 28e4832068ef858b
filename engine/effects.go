package engine

import (
	"context"
	"reflect"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"

	"avfs/wire"
)

// EffectsEntrypoint is the Rego document of the effects policy: what a
// run did (wire.EffectsInput), decided after the run and before its
// changes become the vault's. It is an object {"decision": D, "reasons":
// [...]} like Entrypoint's, without a sandbox object (see DecideEffects).
const EffectsEntrypoint = "data.avfs.effects.decision"

// prepareEffects prepares EffectsEntrypoint on the compiled policy, or
// returns nil when no rule of the bundles defines it: such a policy has
// no effects stage (HasEffects).
func prepareEffects(ctx context.Context, compiler *ast.Compiler, store storage.Store) (*rego.PreparedEvalQuery, error) {
	if len(compiler.GetRulesExact(ast.MustParseRef(EffectsEntrypoint))) == 0 {
		return nil, nil
	}
	pq, err := rego.New(rego.Query(EffectsEntrypoint), rego.Compiler(compiler), rego.Store(store),
		rego.SetRegoVersion(ast.RegoV1), rego.StrictBuiltinErrors(true)).PrepareForEval(ctx)
	if err != nil {
		return nil, CompileError("prepare the effects policy "+EffectsEntrypoint, err)
	}
	return &pq, nil
}

// HasEffects reports whether the policy decides on effects: whether a rule
// of its bundles defines EffectsEntrypoint. A run under a policy without
// one keeps its changes as the first decision had it.
func (p *Policy) HasEffects() bool { return p.effects != nil }

// DecideEffects evaluates the effects policy for what a run did: the
// decision on its changes and its reasons, sorted from the highest
// decision down. It fails closed exactly as Decide does (an error, an
// undefined decision, a bad shape, the deadline, invalid configuration
// data, a policy made with NewUnavailablePolicy: deny with the engine's
// reason saying why); a policy without
// HasEffects is deny with ReasonFailClosed too, so a caller that asks
// without checking never keeps changes it should not. res.Sandbox is
// always empty: an effects decision grants nothing. Safe for concurrent
// use; it reads nothing but the compiled policy and in.
func (p *Policy) DecideEffects(ctx context.Context, in *wire.EffectsInput) (res wire.PolicyResult, err error) {
	res = wire.PolicyResult{Bundles: p.Bundles(), Reasons: []wire.Reason{}}
	start := time.Now()
	defer func() { res.EvalUS = max(time.Since(start).Microseconds(), 1) }()
	if p.unavailable != "" {
		return p.unavailableResult(res), nil
	}
	if len(p.configProblems) > 0 {
		res.Decision = wire.Deny
		for _, problem := range p.configProblems {
			res.Reasons = append(res.Reasons, wire.Reason{ID: ReasonConfigInvalid, Decision: wire.Deny,
				Message: "denied because the policy's configuration data is invalid: " + problem})
		}
		return res, nil
	}
	if p.effects == nil {
		return failClosed(res, "no rule defines the effects policy "+EffectsEntrypoint), nil
	}
	if in == nil {
		return failClosed(res, "there is no effects input document"), nil
	}
	if _, ok := p.evaluate(ctx, &res, *p.effects, EffectsEntrypoint, EffectsInputValue(in), ExplainOff); !ok {
		return res, nil
	}
	sortReasons(res.Reasons)
	return res, nil
}

// EffectsInputValue converts the effects input to the Rego value the
// policy sees, as InputValue does for the first decision's input (which
// it holds as input.command): nil slices and maps become [] and {}.
func EffectsInputValue(in *wire.EffectsInput) ast.Value {
	if in == nil {
		return ast.InternedNullTerm.Value
	}
	return structTerm(reflect.ValueOf(in).Elem(), func(name string) *ast.Term {
		if name == "command" {
			return ast.NewTerm(InputValue(in.Command))
		}
		return nil
	}).Value
}
