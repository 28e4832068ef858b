package engine

import (
	"regexp"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/lineage"

	"avfs/wire"
)

// maxLocal is the longest value shown for a local variable.
const maxLocal = 200

// internalVar matches variables the compiler and the rego package make up
// (__local4__, _term_0_0): they are shown as _.
var internalVar = regexp.MustCompile(`^(__local\d+__|_term_\d+_\d+)$`)

// Trace converts OPA trace events into avfs trace events, keeping those the
// explain mode asks for: ExplainNotes keeps trace() notes and the queries
// leading to them, ExplainFails the failed expressions and the queries
// leading to them, ExplainFull everything but unification steps.
func Trace(events []*topdown.Event, mode string) []wire.TraceEvent {
	// Depths come from the whole trace, before filtering drops parents.
	depths := map[uint64]int{}
	for _, ev := range events {
		depth(depths, ev)
	}
	switch mode {
	case ExplainNotes:
		events = lineage.Notes(events)
	case ExplainFails:
		events = lineage.Fails(events)
	default:
		events = lineage.Full(events)
	}
	out := make([]wire.TraceEvent, 0, len(events))
	for _, ev := range events {
		out = append(out, convertEvent(ev, depth(depths, ev)))
	}
	return out
}

// depth is the nesting of the event's query: the top query is 1, a query
// is one deeper than its parent (as OPA's pretty trace counts).
func depth(ds map[uint64]int, ev *topdown.Event) int {
	d, ok := ds[ev.QueryID]
	if !ok {
		d = ds[ev.ParentID] + 1
		ds[ev.QueryID] = d
	}
	return d
}

func convertEvent(ev *topdown.Event, depth int) wire.TraceEvent {
	te := wire.TraceEvent{Op: strings.ToLower(string(ev.Op)), Depth: depth}
	if loc := ev.Location; loc != nil {
		te.Location = &wire.TraceLocation{File: loc.File, Row: loc.Row, Col: loc.Col}
	}
	if ev.Op == topdown.NoteOp {
		te.Message = ev.Message
	}
	switch n := ev.Node.(type) {
	case *ast.Rule:
		te.Rule = rulePath(n)
	case *ast.Expr, ast.Body:
		te.Query = source(ev, n)
	}
	if ev.Ref != nil && te.Query == "" {
		te.Query = ev.Ref.String()
	}
	te.Locals = locals(ev)
	return te
}

// rulePath is the document a rule defines: data.avfs.rules.deny.reasons.
func rulePath(r *ast.Rule) string {
	ref := r.Ref().GroundPrefix()
	if r.Module != nil && !ref.HasPrefix(ast.DefaultRootRef) {
		ref = r.Module.Package.Path.Extend(ref)
	}
	return ref.String()
}

// source prints an expression or query with the variables named as the
// policy author wrote them; compiler temporaries become _.
func source(ev *topdown.Event, node ast.Node) string {
	var cpy ast.Node
	switch n := node.(type) {
	case *ast.Expr:
		cpy = n.Copy()
	case ast.Body:
		cpy = n.Copy()
	}
	out, err := ast.TransformVars(cpy, func(v ast.Var) (ast.Value, error) {
		return ast.Var(varName(ev, v)), nil
	})
	if n, ok := out.(ast.Node); ok && err == nil {
		return n.String()
	}
	return cpy.String()
}

// varName is the name the author gave v, or "_" for a made-up variable.
func varName(ev *topdown.Event, v ast.Var) string {
	if meta, ok := ev.LocalMetadata[v]; ok && !internalVar.MatchString(string(meta.Name)) {
		return string(meta.Name)
	}
	if internalVar.MatchString(string(v)) || v.IsGenerated() {
		return "_"
	}
	return string(v)
}

// locals are the author's variables bound at the event, as Rego text.
func locals(ev *topdown.Event) map[string]string {
	if ev.Locals == nil || ev.Locals.Len() == 0 {
		return nil
	}
	out := map[string]string{}
	ev.Locals.Iter(func(k, v ast.Value) bool {
		name := k.String()
		if kv, ok := k.(ast.Var); ok {
			name = varName(ev, kv)
		}
		if name == "_" || strings.HasPrefix(name, "$") {
			return false
		}
		s := v.String()
		if len(s) > maxLocal {
			s = s[:maxLocal-3] + "..."
		}
		out[name] = s
		return false
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
