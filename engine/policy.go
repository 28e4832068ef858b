package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"

	"avfs/bundles"
	"avfs/wire"
)

// ConfigProblems is the optional Rego document NewPolicy evaluates once,
// without input: a set (or array) of strings saying what is wrong with
// the policy's configuration data. While it is not empty every decision is
// deny (ReasonConfigInvalid).
const ConfigProblems = "data.avfs.config_problems"

// Entrypoint is the Rego document avfs evaluates. It must be an object
// {"decision": D, "reasons": [{"id", "message", "decision"}, …]} with an
// optional "sandbox": {"network": "host"|"none"} (see Decide).
const Entrypoint = "data.avfs.decision"

// Reason ids the engine itself gives.
const (
	// ReasonFailClosed is given with deny when the policy cannot decide:
	// evaluation failed, the decision is undefined or not one of the four.
	ReasonFailClosed = "avfs.engine.fail_closed"
	// ReasonRaised is given when the policy's decision was lower than one of
	// its own reasons and the engine raised it to the highest.
	ReasonRaised = "avfs.engine.raised"
	// ReasonSandboxInvalid is given with deny when the decision's sandbox
	// object is not one avfs can read: what a policy meant to grant is
	// not guessed.
	ReasonSandboxInvalid = "avfs.engine.sandbox_invalid"
	// ReasonConfigInvalid is given with deny, once for each problem, when
	// the policy's ConfigProblems is not empty.
	ReasonConfigInvalid = "avfs.engine.config_invalid"
	// ReasonEvalTimeout is given with deny when the evaluation took longer
	// than the policy's deadline (PolicyOptions.EvalTimeout).
	ReasonEvalTimeout = "avfs.engine.eval_timeout"
	// ReasonPolicyUnavailable is given with deny by a policy made with
	// NewUnavailablePolicy: there is no policy to evaluate yet (bundles
	// the configuration names were never activated).
	ReasonPolicyUnavailable = "avfs.engine.policy_unavailable"
)

// DefaultEvalTimeout is the deadline of one decision when
// PolicyOptions.EvalTimeout is zero.
const DefaultEvalTimeout = time.Second

// Explain modes of DecideOptions.
const (
	ExplainOff   = ""      // no trace (the default, and the fast path)
	ExplainNotes = "notes" // only trace() notes, with the queries leading to them
	ExplainFails = "fails" // the expressions that failed, with the queries leading to them
	ExplainFull  = "full"  // every step
)

// Policy is the compiled policy: the entrypoint query prepared once from a
// set of bundles. It is safe for concurrent use.
type Policy struct {
	query   rego.PreparedEvalQuery
	bundles []wire.BundleInfo
	timeout time.Duration
	// configProblems is the value of ConfigProblems, sorted.
	configProblems []string
	// programs are the program specs of the bundles (ProgramsDocument).
	programs *Programs
	// effects is EffectsEntrypoint prepared, nil when no rule defines it.
	effects *rego.PreparedEvalQuery
	// unavailable, when not empty, is why there is no policy: every
	// decision is deny (NewUnavailablePolicy).
	unavailable string
}

// NewUnavailablePolicy returns the policy in force while there is none to
// evaluate, such as before the bundles a configuration names have been
// activated: every Decide and DecideEffects is deny with the single reason
// ReasonPolicyUnavailable, whose message is "denied because no policy is
// available: " and why. It never allows anything, evaluates nothing and
// grants nothing; an empty why is still deny (with a generic message).
// bundles are what Bundles reports (the bundles it stands for). It has no
// program specs (Programs is nil: commands are parsed with the defaults)
// and no effects rule. It is safe for concurrent use.
func NewUnavailablePolicy(why string, bundles []wire.BundleInfo) *Policy {
	if why == "" {
		why = "the policy has not been loaded"
	}
	if bundles == nil {
		bundles = []wire.BundleInfo{}
	}
	return &Policy{bundles: slices.Clone(bundles), timeout: DefaultEvalTimeout, unavailable: why}
}

// Unavailable is why the policy denies every decision when it was made
// with NewUnavailablePolicy, "" otherwise.
func (p *Policy) Unavailable() string { return p.unavailable }

// unavailableResult is the deny of a policy made with NewUnavailablePolicy.
func (p *Policy) unavailableResult(res wire.PolicyResult) wire.PolicyResult {
	res.Decision = wire.Deny
	res.Reasons = []wire.Reason{{ID: ReasonPolicyUnavailable, Decision: wire.Deny,
		Message: "denied because no policy is available: " + p.unavailable}}
	return res
}

// PolicyOptions tune how NewPolicy compiles the bundles and how long a
// decision may take.
type PolicyOptions struct {
	// AllowNondeterministic lets bundles call RefusedBuiltins (http.send,
	// time.now_ns, rand.intn …). It weakens the policy: a decision may then
	// depend on the network, the clock or chance, and a bundle may send
	// the input (the agent's commands) to a server.
	AllowNondeterministic bool
	// EvalTimeout is the deadline of one decision; zero is
	// DefaultEvalTimeout. A decision that takes longer is deny.
	EvalTimeout time.Duration
}

// DecideOptions tune one decision.
type DecideOptions struct {
	// Explain attaches a trace of the evaluation to the result: one of
	// ExplainOff, ExplainNotes, ExplainFails, ExplainFull. Tracing is slow.
	Explain string
}

// NewPolicy compiles the bundles of set together and prepares the
// entrypoint. Compile errors are bundle_invalid with the file, row and
// column; a set whose bundles do not define data.avfs.decision is
// bundle_invalid too. Unless opts.AllowNondeterministic, a bundle that
// calls one of RefusedBuiltins is bundle_invalid with the details
// "builtin" (its name), "file", "row" and "col" (the call), and the
// message says why it is refused and which setting allows it. A negative
// opts.EvalTimeout is invalid_input.
func NewPolicy(ctx context.Context, set *bundles.Set, opts PolicyOptions) (*Policy, error) {
	if opts.EvalTimeout < 0 {
		return nil, wire.Errorf(wire.CodeInvalidInput, "the policy evaluation timeout %s is negative", opts.EvalTimeout)
	}
	names := make([]string, 0, len(set.Bundles))
	for _, b := range set.Bundles {
		names = append(names, b.Name)
	}
	compiler := ast.NewCompiler().WithCapabilities(Capabilities(opts.AllowNondeterministic))
	// The store is shared with the query of ConfigProblems. Data is kept as
	// AST values: reading data.avfs.config then costs nothing per
	// evaluation instead of a conversion of the lists.
	store := inmem.NewWithOpts(inmem.OptReturnASTValuesOnRead(true), inmem.OptRoundTripOnWrite(false))
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "compile policy: %w", err)
	}
	regoOpts := []func(*rego.Rego){
		rego.Store(store),
		rego.Transaction(txn),
		rego.Query(Entrypoint),
		rego.Compiler(compiler),
		rego.Capabilities(compiler.Capabilities()),
		rego.SetRegoVersion(ast.RegoV1),
		// A builtin error is an evaluation error, so the decision fails
		// closed, instead of silently making a rule undefined.
		rego.StrictBuiltinErrors(true),
	}
	for _, b := range set.Bundles {
		regoOpts = append(regoOpts, rego.ParsedBundle(b.Name, b.Bundle))
	}
	pq, err := rego.New(regoOpts...).PrepareForEval(ctx)
	if err == nil {
		err = store.Commit(ctx, txn)
	} else {
		store.Abort(ctx, txn)
	}
	if err != nil {
		return nil, CompileError(fmt.Sprintf("compile policy from bundles %s", strings.Join(names, ", ")), err).With("bundles", names)
	}
	ref := ast.MustParseRef(Entrypoint)
	if len(compiler.GetRulesExact(ref)) == 0 {
		return nil, wire.Errorf(wire.CodeBundleInvalid,
			"no rule defines the entrypoint %s in bundles %s (it must be a rule in package avfs)", Entrypoint, strings.Join(names, ", ")).
			With("bundles", names)
	}
	p := &Policy{query: pq, bundles: set.Infos(), timeout: cmp.Or(opts.EvalTimeout, DefaultEvalTimeout)}
	p.configProblems = configProblems(ctx, compiler, store, p.timeout)
	if p.programs, err = bundlePrograms(ctx, compiler, store, p.timeout); err != nil {
		return nil, err
	}
	if p.effects, err = prepareEffects(ctx, compiler, store); err != nil {
		return nil, err
	}
	return p, nil
}

// ProgramsDocument is the document of the default program specs, and
// ExtensionPrograms the key of an extension bundle's own
// (data.extensions.NAME.programs): see Policy.Programs.
const (
	ProgramsDocument  = "data.avfs.programs"
	ExtensionPrograms = "programs"
)

// bundlePrograms reads the program specs of the compiled bundles:
// ProgramsDocument, each program of an extension's
// data.extensions.NAME.programs replacing it. Specs that are data (a
// bundle's data.json) are read from the store as the bundle loader made
// them; only a bundle whose rules produce them is evaluated, within
// timeout. A spec that readProgramsValue refuses, a program two extensions
// both give, or a document that cannot be evaluated is a bundle_invalid
// error.
func bundlePrograms(ctx context.Context, compiler *ast.Compiler, store storage.Store, timeout time.Duration) (*Programs, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base, err := programsDocument(ctx, compiler, store, ast.MustParseRef(ProgramsDocument))
	if err != nil {
		return nil, err
	}
	programs, err := readProgramsValue(base, ProgramsDocument)
	if err != nil {
		return nil, err
	}
	exts, err := programsDocument(ctx, compiler, store, ast.MustParseRef("data.extensions"))
	if err != nil {
		return nil, err
	}
	obj, _ := exts.(ast.Object)
	if obj == nil {
		return programs, nil
	}
	owner := map[string]string{}
	for _, name := range sortedKeys(obj) {
		bundle, _ := obj.Get(ast.StringTerm(name)).Value.(ast.Object)
		if bundle == nil {
			continue
		}
		doc := "data.extensions." + name + "." + ExtensionPrograms
		specs := bundle.Get(ast.StringTerm(ExtensionPrograms))
		if specs == nil {
			continue
		}
		ext, err := readProgramsValue(specs.Value, doc)
		if err != nil {
			return nil, err
		}
		for _, prog := range ext.Names() {
			if other, ok := owner[prog]; ok {
				return nil, wire.Errorf(wire.CodeBundleInvalid, "program specs: %s and %s both give a spec of %s (one program has one spec)",
					other, doc, prog).With("program", prog)
			}
			owner[prog] = doc
		}
		programs = programs.With(ext)
	}
	return programs, nil
}

// programsDocument returns the document at ref (nil when there is none):
// read from the store when no rule defines it or anything under it that
// holds program specs, evaluated otherwise. For data.extensions only the
// rules named ExtensionPrograms count: the others (reasons …) depend on
// the input and are never read here.
func programsDocument(ctx context.Context, compiler *ast.Compiler, store storage.Store, ref ast.Ref) (ast.Value, error) {
	byRules := false
	for _, r := range compiler.GetRules(ref) {
		path := r.Ref().GroundPrefix()
		if len(ref) == 2 { // data.extensions: data.extensions.NAME.programs…
			byRules = byRules || len(path) >= 4 && path[3].Equal(ast.StringTerm(ExtensionPrograms))
		} else {
			byRules = true
		}
	}
	if !byRules {
		path, err := storage.NewPathForRef(ref)
		if err != nil {
			return nil, wire.Errorf(wire.CodeInternal, "program specs: %s is no storage path: %v", ref, err)
		}
		v, err := storage.ReadOne(ctx, store, path)
		switch {
		case storage.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, wire.Errorf(wire.CodeBundleInvalid, "program specs: %s could not be read: %v", ref, err)
		}
		if av, isAST := v.(ast.Value); isAST {
			return av, nil
		}
		return ast.InterfaceToValue(v)
	}
	rs, err := rego.New(rego.ParsedQuery(ast.NewBody(ast.NewExpr(ast.NewTerm(ref)))), rego.Compiler(compiler), rego.Store(store),
		rego.StrictBuiltinErrors(true)).Eval(ctx)
	if err != nil {
		return nil, wire.Errorf(wire.CodeBundleInvalid, "program specs: %s could not be evaluated: %v", ref, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil
	}
	return ast.InterfaceToValue(rs[0].Expressions[0].Value)
}

// Programs returns the program specs of the policy's bundles, for
// ParseRequest.Programs: the default bundle's data.avfs.programs with each
// program an extension bundle specifies in data.extensions.NAME.programs
// replaced by that spec. A policy without the default bundle knows only
// what its own bundles specify (possibly nothing: then every word is
// judged by its shape).
func (p *Policy) Programs() *Programs { return p.programs }

// configProblems evaluates ConfigProblems: nil when it is undefined, its
// strings otherwise, sorted. It fails closed: an evaluation error, a
// deadline passed or a value that is not a collection of strings is a
// problem too.
func configProblems(ctx context.Context, compiler *ast.Compiler, store storage.Store, timeout time.Duration) []string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := rego.New(rego.Query(ConfigProblems), rego.Compiler(compiler), rego.Store(store), rego.StrictBuiltinErrors(true)).Eval(ctx)
	if err != nil {
		return []string{fmt.Sprintf("%s could not be evaluated: %v", ConfigProblems, err)}
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil
	}
	list, ok := rs[0].Expressions[0].Value.([]any)
	var problems []string
	for _, v := range list {
		s, isString := v.(string)
		ok = ok && isString
		problems = append(problems, s)
	}
	if !ok {
		return []string{fmt.Sprintf("%s is %s, not a set of strings", ConfigProblems, describe(rs[0].Expressions[0].Value))}
	}
	slices.Sort(problems)
	return problems
}

// Bundles describes the bundles the policy was compiled from.
func (p *Policy) Bundles() []wire.BundleInfo { return slices.Clone(p.bundles) }

// Decide evaluates the policy for one input: the decision, its reasons
// sorted from the highest decision down, and what the decision grants the
// sandbox (res.Sandbox, the decision's optional "sandbox" object).
//
// It fails closed, and err is then nil:
//   - when the policy errs, is undefined, or its decision or reasons are
//     not of the expected shape, the result is deny with the single reason
//     ReasonFailClosed saying why;
//   - when the policy was made with NewUnavailablePolicy, the result is
//     deny with the single reason ReasonPolicyUnavailable;
//   - when the policy's ConfigProblems was not empty when it was loaded,
//     the result is deny with one ReasonConfigInvalid for each problem,
//     and the policy is not evaluated;
//   - when the evaluation runs past the policy's deadline
//     (PolicyOptions.EvalTimeout, a second by default), it is interrupted
//     and the result is deny with the single reason ReasonEvalTimeout,
//     whatever the policy would have decided: a decision that comes after
//     the deadline is dropped too. A ctx that ends first fails closed
//     (ReasonFailClosed);
//   - when the decision is lower than one of its own reasons, it is raised
//     to the highest and ReasonRaised is added;
//   - when the sandbox object is not an object, has a key other than
//     "network", or a network other than the string "host" or "none", the
//     result is deny with ReasonSandboxInvalid saying what was wrong, next
//     to the policy's own reasons.
//
// A missing sandbox object, or one without network, grants nothing (the
// zero SandboxGrant). Decide never grants more than the policy said, and
// a deny grants nothing: the grant of a decision that ends as deny is
// dropped. err is only for a bad call (an unknown explain mode). Decide
// runs no command and reads nothing but the compiled policy and in, which
// it never modifies; it is safe for concurrent use.
func (p *Policy) Decide(ctx context.Context, in *wire.Input, opts DecideOptions) (res wire.PolicyResult, err error) {
	res = wire.PolicyResult{Bundles: p.Bundles(), Reasons: []wire.Reason{}}
	switch opts.Explain {
	case ExplainOff, ExplainNotes, ExplainFails, ExplainFull:
	default:
		return res, wire.Errorf(wire.CodeInvalidInput, "unknown explain mode %q (want notes, fails or full)", opts.Explain)
	}
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
	if in == nil {
		return failClosed(res, "there is no input document"), nil
	}
	value, ok := p.evaluate(ctx, &res, p.query, Entrypoint, InputValue(in), opts.Explain)
	if !ok {
		return res, nil
	}
	grant, problem := parseGrant(value)
	if problem != "" {
		res.Decision = wire.Deny
		res.Reasons = append(res.Reasons, wire.Reason{ID: ReasonSandboxInvalid, Decision: wire.Deny,
			Message: "denied because the decision's sandbox object is invalid: " + problem})
	}
	if res.Decision != wire.Deny {
		res.Sandbox = grant
	}
	sortReasons(res.Reasons)
	return res, nil
}

// evaluate runs the prepared query of entry on input into res: its
// decision and reasons, raised to the highest of them (ReasonRaised), and
// the trace. ok is false when it failed closed (res is then the deny
// saying why: an error, undefined, a bad shape, the deadline); value is
// the entrypoint's value otherwise, for the caller's own fields.
func (p *Policy) evaluate(ctx context.Context, res *wire.PolicyResult, query rego.PreparedEvalQuery, entry string, input ast.Value, explain string) (value any, ok bool) {
	if err := ctx.Err(); err != nil {
		*res = failClosed(*res, fmt.Sprintf("policy evaluation failed: %v", err))
		return nil, false
	}
	// Without EvalMetrics, every evaluation would fill a fresh metrics
	// collection (maps and a timer) that nobody reads.
	evalOpts := []rego.EvalOption{rego.EvalParsedInput(input), rego.EvalMetrics(metrics.NoOp())}
	var tracer *topdown.BufferTracer
	if explain != ExplainOff {
		tracer = topdown.NewBufferTracer()
		evalOpts = append(evalOpts, rego.EvalQueryTracer(tracer))
	}
	evalCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	rs, err := query.Eval(evalCtx, evalOpts...)
	if tracer != nil {
		res.Trace = Trace(*tracer, explain)
	}
	// Past the deadline the decision is deny even when the evaluation
	// ended: a result that came too late is not used.
	if ctx.Err() == nil && errors.Is(evalCtx.Err(), context.DeadlineExceeded) {
		*res = timedOut(*res, p.timeout)
		return nil, false
	}
	if err != nil {
		*res = failClosed(*res, fmt.Sprintf("policy evaluation failed: %v", err))
		return nil, false
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		*res = failClosed(*res, "the policy decision "+entry+" is undefined")
		return nil, false
	}
	value = rs[0].Expressions[0].Value
	decision, reasons, problem := parseResult(entry, value)
	if problem != "" {
		*res = failClosed(*res, problem)
		return nil, false
	}
	res.Decision, res.Reasons = decision, reasons
	levels := []wire.Decision{decision}
	for _, r := range reasons {
		levels = append(levels, r.Decision)
	}
	if top := wire.Join(levels...); top != decision {
		res.Decision = top
		res.Reasons = append(res.Reasons, wire.Reason{ID: ReasonRaised, Decision: top,
			Message: fmt.Sprintf("the policy decided %s but one of its reasons is %s; the highest wins", decision, top)})
	}
	return value, true
}

// CountExpressions evaluates the policy for in as Decide would (the same
// prepared query, input document and deadline) and returns how many Rego
// expressions OPA evaluated: the topdown.EvalOp events of the evaluation,
// an expression counted each time it is evaluated (once per element of a
// collection it iterates over, once per rule body or function call that
// reaches it), the entrypoint query included. It is 0, with a nil error,
// when Decide would not evaluate the policy because its ConfigProblems are
// not empty.
//
// It is a measure of the policy's work, for benchmarks and tests, and not
// a way to decide: it traces the evaluation, which is slower, and returns
// no decision. Decide never traces unless its DecideOptions.Explain asks.
// err is invalid_input for a nil input, and the evaluation's error
// (ctx ended, deadline passed, a builtin failed) otherwise; the count is
// then that of the expressions evaluated until the error. It is safe for
// concurrent use.
func (p *Policy) CountExpressions(ctx context.Context, in *wire.Input) (int, error) {
	if len(p.configProblems) > 0 {
		return 0, nil
	}
	if in == nil {
		return 0, wire.Errorf(wire.CodeInvalidInput, "there is no input document")
	}
	counter := &exprCounter{}
	evalCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, err := p.query.Eval(evalCtx, rego.EvalParsedInput(InputValue(in)), rego.EvalMetrics(metrics.NoOp()), rego.EvalQueryTracer(counter))
	if err == nil && evalCtx.Err() != nil {
		err = evalCtx.Err()
	}
	return counter.n, err
}

// exprCounter is a topdown.QueryTracer that counts the expressions
// evaluated (EvalOp events) and keeps nothing else.
type exprCounter struct{ n int }

func (*exprCounter) Enabled() bool               { return true }
func (*exprCounter) Config() topdown.TraceConfig { return topdown.TraceConfig{} }
func (c *exprCounter) TraceEvent(ev topdown.Event) {
	if ev.Op == topdown.EvalOp {
		c.n++
	}
}

// timedOut turns res into the deny of a decision that took longer than timeout.
func timedOut(res wire.PolicyResult, timeout time.Duration) wire.PolicyResult {
	res.Decision, res.Sandbox = wire.Deny, wire.SandboxGrant{}
	res.Reasons = append(res.Reasons[:0], wire.Reason{ID: ReasonEvalTimeout, Decision: wire.Deny,
		Message: fmt.Sprintf("denied because the policy took longer than its deadline of %s to decide (policy.eval_timeout)", timeout)})
	return res
}

// failClosed turns res into a deny saying why.
func failClosed(res wire.PolicyResult, why string) wire.PolicyResult {
	res.Decision, res.Sandbox = wire.Deny, wire.SandboxGrant{}
	res.Reasons = append(res.Reasons[:0], wire.Reason{ID: ReasonFailClosed, Decision: wire.Deny,
		Message: "denied because the policy could not decide: " + why})
	return res
}

// parseResult checks the entrypoint's value; problem says what is wrong with it.
func parseResult(entry string, v any) (decision wire.Decision, reasons []wire.Reason, problem string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return "", nil, fmt.Sprintf("%s is %s, not an object", entry, describe(v))
	}
	s, ok := obj["decision"].(string)
	if !ok || !wire.Decision(s).Valid() {
		return "", nil, fmt.Sprintf("%s.decision is %s, not one of allow, allow_with_checkpoint, require_approval, deny", entry, describe(obj["decision"]))
	}
	list, ok := obj["reasons"].([]any)
	if !ok && obj["reasons"] != nil {
		return "", nil, fmt.Sprintf("%s.reasons is %s, not an array", entry, describe(obj["reasons"]))
	}
	reasons = make([]wire.Reason, 0, len(list))
	for i, item := range list {
		m, _ := item.(map[string]any)
		id, _ := m["id"].(string)
		msg, _ := m["message"].(string)
		d, _ := m["decision"].(string)
		if m == nil || id == "" || !wire.Decision(d).Valid() {
			return "", nil, fmt.Sprintf("%s.reasons[%d] is %s, not {id, message, decision} with one of the four decisions", entry, i, describe(item))
		}
		reasons = append(reasons, wire.Reason{ID: id, Message: msg, Decision: wire.Decision(d)})
	}
	return wire.Decision(s), reasons, ""
}

// grantFields reads each key the decision's sandbox object may have into
// the grant; the problem says what is wrong with the value.
var grantFields = map[string]func(g *wire.SandboxGrant, v any) (problem string){
	"network": func(g *wire.SandboxGrant, v any) string {
		s, ok := v.(string)
		if !ok || !wire.Network(s).Valid() {
			return fmt.Sprintf("%s.sandbox.network is %s, not one of host, none", Entrypoint, describe(v))
		}
		g.Network = wire.Network(s)
		return ""
	},
	"preview": func(g *wire.SandboxGrant, v any) string {
		b, ok := v.(bool)
		if !ok {
			return fmt.Sprintf("%s.sandbox.preview is %s, not a boolean", Entrypoint, describe(v))
		}
		g.Preview = b
		return ""
	},
}

// parseGrant reads the decision's optional sandbox object; problem says
// what is wrong with it.
func parseGrant(result any) (grant wire.SandboxGrant, problem string) {
	decision, _ := result.(map[string]any)
	v, ok := decision["sandbox"]
	if !ok {
		return grant, ""
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return grant, fmt.Sprintf("%s.sandbox is %s, not an object", Entrypoint, describe(v))
	}
	keys := slices.Sorted(maps.Keys(obj))
	for _, k := range keys {
		read, known := grantFields[k]
		if !known {
			return wire.SandboxGrant{}, fmt.Sprintf("%s.sandbox has the unknown key %q (known: %s)", Entrypoint, k, strings.Join(slices.Sorted(maps.Keys(grantFields)), ", "))
		}
		if problem := read(&grant, obj[k]); problem != "" {
			return wire.SandboxGrant{}, problem
		}
	}
	return grant, ""
}

// describe shows a policy value in an error message.
func describe(v any) string {
	if v == nil {
		return "missing or null"
	}
	s := fmt.Sprintf("%v", v)
	if str, ok := v.(string); ok {
		s = strconv.Quote(str)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// sortReasons orders reasons from the highest decision down, then by id and message.
func sortReasons(rs []wire.Reason) {
	slices.SortStableFunc(rs, func(a, b wire.Reason) int {
		return cmp.Or(cmp.Compare(b.Decision.Rank(), a.Decision.Rank()), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Message, b.Message))
	})
}

// InputValue converts the input document to the Rego value the policy
// sees. It follows the JSON form of wire.Input (json tags, omitempty)
// without a JSON round trip, except that nil slices and maps become [] and
// {}: the policy never sees null where the schema has a list.
//
// The top-level command is most often also the first of commands (the same
// words, parsed the same way); it is then converted once and the two share
// the term, which evaluation never modifies.
func InputValue(in *wire.Input) ast.Value {
	if in == nil {
		return ast.InternedNullTerm.Value
	}
	commands := toTerm(reflect.ValueOf(in.Commands))
	var command *ast.Term
	if len(in.Commands) > 0 && reflect.DeepEqual(in.Command, in.Commands[0]) {
		command = commands.Value.(*ast.Array).Elem(0)
	}
	return structTerm(reflect.ValueOf(in).Elem(), func(name string) *ast.Term {
		switch name {
		case "commands":
			return commands
		case "command":
			return command
		}
		return nil
	}).Value
}

// toTerm converts a Go value to a Rego term, sharing the interned terms of
// OPA (booleans, small numbers, common strings, empty collections) and the
// key terms of struct fields. Terms are never modified by evaluation.
func toTerm(v reflect.Value) *ast.Term {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ast.InternedNullTerm
		}
		return toTerm(v.Elem())
	case reflect.String:
		return ast.InternedTerm(v.String())
	case reflect.Bool:
		return ast.InternedTerm(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return ast.InternedTerm(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return ast.NewTerm(ast.Number(strconv.FormatUint(v.Uint(), 10)))
	case reflect.Float32, reflect.Float64:
		return ast.NewTerm(ast.Number(strconv.FormatFloat(v.Float(), 'g', -1, 64)))
	case reflect.Slice, reflect.Array:
		n := v.Len()
		if n == 0 {
			return ast.InternedEmptyArray
		}
		terms := make([]*ast.Term, n)
		for i := range terms {
			terms[i] = toTerm(v.Index(i))
		}
		return ast.ArrayTerm(terms...)
	case reflect.Map:
		if v.Len() == 0 {
			return ast.InternedEmptyObject
		}
		obj := ast.NewObjectWithCapacity(v.Len())
		iter := v.MapRange()
		for iter.Next() {
			obj.Insert(ast.InternedTerm(fmt.Sprint(iter.Key().Interface())), toTerm(iter.Value()))
		}
		return ast.NewTerm(obj)
	case reflect.Struct:
		return structTerm(v, nil)
	}
	return ast.InternedNullTerm
}

// structTerm converts a struct to an object. converted, when not nil, may
// give the term of a field (by its JSON name) already converted; nil means
// convert it here.
func structTerm(v reflect.Value, converted func(name string) *ast.Term) *ast.Term {
	fields := structFields(v.Type())
	obj := ast.NewObjectWithCapacity(len(fields))
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && fv.IsZero() {
			continue
		}
		var t *ast.Term
		if converted != nil {
			t = converted(f.name)
		}
		if t == nil {
			t = toTerm(fv)
		}
		obj.Insert(f.key, t)
	}
	return ast.NewTerm(obj)
}

type field struct {
	name      string    // the JSON name
	key       *ast.Term // the JSON name as a term, shared by every value of the type
	index     int
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type -> []field

// structFields are the JSON fields of a struct type, as encoding/json names them.
func structFields(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	var fs []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, field{name: name, key: ast.StringTerm(name), index: i, omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty")})
	}
	fieldCache.Store(t, fs)
	return fs
}

// IsFailClosed reports whether a result is a deny the engine gave because
// the policy could not decide: it failed (ReasonFailClosed), ran past its
// deadline (ReasonEvalTimeout), has invalid configuration data
// (ReasonConfigInvalid) or is not available (ReasonPolicyUnavailable).
func IsFailClosed(res wire.PolicyResult) bool {
	return slices.ContainsFunc(res.Reasons, func(r wire.Reason) bool {
		return r.ID == ReasonFailClosed || r.ID == ReasonEvalTimeout || r.ID == ReasonConfigInvalid || r.ID == ReasonPolicyUnavailable
	})
}
