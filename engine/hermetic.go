package engine

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"avfs/bundles"
	"avfs/wire"
)

// networkBuiltins are the builtins that reach the network, refused whether
// or not OPA marks them non-deterministic.
var networkBuiltins = []string{"http.send", "net.lookup_ip_addr"}

// refusalWhy says why a refused builtin would make a decision depend on
// more than the policy, its data and the input. A builtin OPA marks
// non-deterministic that is not listed here is refused as "is not
// deterministic".
var refusalWhy = map[string]string{
	"http.send":              "reaches the network",
	"net.lookup_ip_addr":     "reaches the network (DNS)",
	"time.now_ns":            "reads the clock",
	"rand.intn":              "is random",
	"uuid.rfc4122":           "is random",
	"opa.runtime":            "reads the environment of the process",
	"io.jwt.decode_verify":   "reads the clock",
	"io.jwt.encode_sign":     "is random for some algorithms",
	"io.jwt.encode_sign_raw": "is random for some algorithms",
	"json.match_schema":      "fetches the remote $ref of a schema",
	"json.verify_schema":     "fetches the remote $ref of a schema",
}

// RefusedBuiltin is a builtin a bundle may not call unless
// PolicyOptions.AllowNondeterministic is set.
type RefusedBuiltin struct {
	Name string `json:"name"`
	Why  string `json:"why"` // "reaches the network", "reads the clock" …
}

var refused = sync.OnceValue(func() []RefusedBuiltin {
	var out []RefusedBuiltin
	for _, b := range ast.Builtins {
		if b.IsNondeterministic() || slices.Contains(networkBuiltins, b.Name) {
			out = append(out, RefusedBuiltin{Name: b.Name, Why: cmp.Or(refusalWhy[b.Name], "is not deterministic")})
		}
	}
	slices.SortFunc(out, func(a, b RefusedBuiltin) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b RefusedBuiltin) bool { return a.Name == b.Name })
})

// RefusedBuiltins lists, sorted by name, the builtins a bundle may not
// call: every builtin OPA marks non-deterministic (ast.Builtin's
// Nondeterministic: the clock, randomness, the process environment,
// remote schemas) and those that reach the network (networkBuiltins). A
// decision made without them depends only on the policy, its data and
// the input. The caller may not modify the result.
func RefusedBuiltins() []RefusedBuiltin { return refused() }

// Capabilities are the capabilities bundles are compiled with: those of
// this OPA version without RefusedBuiltins, unless allowNondeterministic.
// A call to a refused builtin is then OPA's compile error "undefined
// function NAME", located at the call. It returns a new value each call.
func Capabilities(allowNondeterministic bool) *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	if allowNondeterministic {
		return caps
	}
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		_, found := refusedBuiltin(b.Name)
		return found
	})
	// Belt and braces: no host is reachable even by a builtin declared
	// elsewhere (http.send and net.lookup_ip_addr honour AllowNet).
	caps.AllowNet = []string{}
	return caps
}

// refusedBuiltin finds name in RefusedBuiltins.
func refusedBuiltin(name string) (RefusedBuiltin, bool) {
	list := refused()
	i, found := slices.BinarySearchFunc(list, name, func(r RefusedBuiltin, name string) int { return cmp.Compare(r.Name, name) })
	if !found {
		return RefusedBuiltin{}, false
	}
	return list[i], true
}

// RefusedCall finds, among the Rego errors of err (a compile error made
// with Capabilities(false)), the first call to a refused builtin: the
// builtin and where the call is. ok is false when there is none.
func RefusedCall(err error) (b RefusedBuiltin, loc *ast.Location, ok bool) {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return RefusedBuiltin{}, nil, false
	}
	for _, e := range errs {
		name, isUndefined := strings.CutPrefix(e.Message, "undefined function ")
		if !isUndefined {
			continue
		}
		if r, found := refusedBuiltin(name); found {
			return r, e.Location, true
		}
	}
	return RefusedBuiltin{}, nil, false
}

// CompileError is the bundle_invalid error for err, a failure to compile
// bundles, what saying what was compiled. Its details are the file, row
// and col of the first located Rego error; when one of the errors is a
// call to a refused builtin (see Capabilities), they are that call's
// instead, "builtin" names it, and the message says why it is refused and
// that policy.allow_nondeterministic in the config allows it.
func CompileError(what string, err error) *wire.Error {
	if b, loc, ok := RefusedCall(err); ok {
		e := wire.Errorf(wire.CodeBundleInvalid,
			"%s: a bundle may not call %s, which %s (set policy.allow_nondeterministic in the config to allow it): %w", what, b.Name, b.Why, err).
			With("builtin", b.Name)
		if loc != nil {
			e.With("file", loc.File).With("row", loc.Row).With("col", loc.Col)
		}
		return e
	}
	e := wire.Errorf(wire.CodeBundleInvalid, "%s: %w", what, err)
	if loc := bundles.Location(err); loc != nil {
		e.With("file", loc.File).With("row", loc.Row).With("col", loc.Col)
	}
	return e
}
