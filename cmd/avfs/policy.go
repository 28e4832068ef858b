package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/urfave/cli/v2"

	"avfs/bundles"
	"avfs/engine"
	"avfs/runner"
	"avfs/sandbox"
	"avfs/wire"
)

func policyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "evaluate, test and inspect the policy",
		Description: `Policy bundles are loaded in this order: the default bundle embedded in
avfs (unless --no-default-bundle or "no_default_bundle" in the config),
$AVFS_HOME/policy if it exists, the "policy.bundles" of the config file
($AVFS_HOME/config.json or AVFS_CONFIG), then every --bundle. See docs/policy.md.`,
		Subcommands: []*cli.Command{
			policyEvalCommand(e),
			policyTestCommand(e),
			policyInspectCommand(e),
			policyReplayCommand(e),
		},
	}
}

// bundleFlags select the bundles to load; eval and inspect share them.
func bundleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "bundle", Aliases: []string{"b"}, Usage: "load the bundle `DIR|FILE.tar.gz` too (repeatable)"},
		&cli.StringFlag{Name: "verification-key", Usage: "verify bundle signatures with `KEY` (a PEM public key file, or an HMAC secret or a file holding it)"},
		&cli.BoolFlag{Name: "no-default-bundle", Usage: "do not load the default bundle embedded in avfs"},
		&cli.StringFlag{Name: "config-file", Usage: "run OPA's management plugins from OPA's configuration `FILE` (bundles from bundle services, status, decision logs; default: policy.opa_config of the config)"},
	}
}

// bundleOptionsOf is bundleOptions with the config file already read.
func (e *env) bundleOptionsOf(c *cli.Context, cfg config) bundles.Options {
	return bundles.Options{
		IncludeDefault:  !(cfg.Policy.NoDefaultBundle || c.Bool("no-default-bundle")),
		HomePolicyDir:   filepath.Join(e.home, "policy"),
		Paths:           append(slices.Clone(cfg.Policy.Bundles), c.StringSlice("bundle")...),
		VerificationKey: cmp.Or(c.String("verification-key"), cfg.Policy.VerificationKey),
	}
}

// loadPolicy loads the bundles the config file and the flags name and
// compiles the policy as the config says.
// With OPA's configuration (--config-file, policy.opa_config), the bundles
// of OPA's plugins are compiled with them (policyOf).
func (e *env) loadPolicy(c *cli.Context) (*engine.Policy, *bundles.Set, error) {
	cfg, err := loadConfig(e.home)
	if err != nil {
		return nil, nil, err
	}
	return e.policyOf(c.Context, e.bundleOptionsOf(c, cfg), opaConfigPath(c, cfg), cfg)
}

// compilePolicy loads the bundles opts names and compiles them with popts.
func compilePolicy(ctx context.Context, opts bundles.Options, popts engine.PolicyOptions) (*engine.Policy, *bundles.Set, error) {
	set, err := bundles.Load(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	p, err := engine.NewPolicy(ctx, set, popts)
	if err != nil {
		return nil, nil, err
	}
	return p, set, nil
}

// evalResult is the JSON document of `avfs policy eval`.
type evalResult struct {
	wire.PolicyResult
	Input *wire.Input `json:"input,omitempty"`
}

func policyEvalCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "decide what the policy says about a command, without running it",
		UsageText: `avfs policy eval [--explain notes|fails|full] [--input] [--bundle DIR|FILE.tar.gz]… [--verification-key KEY] [--no-default-bundle] [--cwd DIR] [--sandbox namespaces|none] [--approval ID] (-- CMD [ARG…] | --shell "SCRIPT")`,
		Description: `Parses the command as avfs proxy exec would, evaluates the policy and
prints the decision, its reasons and what it grants the sandbox. It exits
0 whatever the decision. --sandbox says how the command would be held:
in namespaces (the vault at ` + sandbox.DefaultWorkspace + `, a private home at your
HOME) or without a sandbox. --approval decides as for a run under that
approval; nothing is verified, since eval runs nothing.`,
		Flags: append(bundleFlags(),
			&cli.StringFlag{Name: "explain", Usage: "attach a trace: `MODE` notes, fails or full"},
			&cli.BoolFlag{Name: "input", Usage: "print the input document the policy saw"},
			&cli.StringFlag{Name: "shell", Usage: "evaluate the shell `SCRIPT` instead of an argv"},
			&cli.StringFlag{Name: "cwd", Value: "/", Usage: "vault working `DIR` of the command"},
			&cli.StringFlag{Name: "sandbox", Value: string(wire.SandboxNamespaces), Usage: "decide for a command held in `MODE` namespaces or none"},
			&cli.StringFlag{Name: "approval", Usage: "decide as for a run under the approval `ID` (not verified)"},
		),
		Action: func(c *cli.Context) error {
			argv, shell := c.Args().Slice(), c.String("shell")
			if (len(argv) == 0) == (shell == "") {
				return usageError("policy eval needs a command after -- or --shell SCRIPT (not both)")
			}
			switch mode := c.String("explain"); mode {
			case engine.ExplainOff, engine.ExplainNotes, engine.ExplainFails, engine.ExplainFull:
			default:
				return usageError("unknown --explain mode %q (want notes, fails or full)", mode)
			}
			view, err := evalSandbox(c.String("sandbox"))
			if err != nil {
				return err
			}
			p, _, err := e.loadPolicy(c)
			if err != nil {
				return err
			}
			// The vault's files, as proxy exec sees them (local_bin). A vault
			// that cannot be opened (none yet) has none: the command is then
			// decided as in a vault without them.
			var ws engine.Workspace
			if v, err := e.readStore().Open(c.Context, e.vaultName()); err == nil {
				defer v.Close()
				ws = runner.Workspace(v)
			}
			in, err := engine.Parse(c.Context, engine.ParseRequest{
				Argv:      argv,
				Shell:     shell,
				Cwd:       c.String("cwd"),
				PathEnv:   os.Getenv("PATH"),
				Request:   wire.RequestInput{ApprovalID: c.String("approval")},
				Sandbox:   view,
				Programs:  p.Programs(),
				Workspace: ws,
			})
			if err != nil {
				return fmt.Errorf("parse command: %w", err)
			}
			res, err := p.Decide(c.Context, in, engine.DecideOptions{Explain: c.String("explain")})
			if err != nil {
				return err
			}
			out := evalResult{PolicyResult: res}
			if c.Bool("input") {
				out.Input = in
			}
			return e.emit(out, func(w io.Writer) error { return printEval(w, out) })
		},
	}
}

// evalSandbox is input.sandbox for `policy eval --sandbox mode`: in
// namespaces the vault at sandbox.DefaultWorkspace and a private home at
// the invoking user's home ("/" when it is unknown); without a sandbox no
// workspace, since eval mounts nothing, so absolute paths are the host's.
func evalSandbox(mode string) (wire.SandboxInput, error) {
	m := wire.SandboxMode(mode)
	if !m.Valid() {
		return wire.SandboxInput{}, usageError("unknown --sandbox mode %q (want namespaces or none)", mode)
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/"
	}
	if m == wire.SandboxNone {
		return sandbox.Input(m, "--sandbox none", "", home), nil
	}
	return sandbox.Input(m, "", sandbox.DefaultWorkspace, home), nil
}

func printEval(w io.Writer, r evalResult) error {
	fmt.Fprintf(w, "decision: %s\n", r.Decision)
	rows := make([]string, 0, len(r.Reasons))
	for _, reason := range r.Reasons {
		rows = append(rows, fmt.Sprintf("  %s\t%s\t%s", reason.Decision, reason.ID, reason.Message))
	}
	fmt.Fprintln(w, "reasons:")
	if err := table(w, "", rows); err != nil {
		return err
	}
	names := make([]string, 0, len(r.Bundles))
	for _, b := range r.Bundles {
		names = append(names, bundleLabel(b))
	}
	fmt.Fprintf(w, "bundles: %s\n", strings.Join(names, ", "))
	fmt.Fprintf(w, "sandbox: network %s\n", cmp.Or(r.Sandbox.Network, wire.NetworkNone))
	if r.Input != nil {
		fmt.Fprintln(w, "input:")
		if err := writeJSON(w, r.Input); err != nil {
			return err
		}
	}
	if len(r.Trace) > 0 {
		fmt.Fprintln(w, "trace:")
		printTrace(w, r.Trace)
	}
	return nil
}

func bundleLabel(b wire.BundleInfo) string {
	if b.Revision != "" {
		return fmt.Sprintf("%s (revision %s)", b.Name, b.Revision)
	}
	return b.Name
}

// printTrace prints trace events one a line: location, indentation by depth, op and query.
func printTrace(w io.Writer, events []wire.TraceEvent) {
	for _, ev := range events {
		loc := ""
		if ev.Location != nil {
			loc = fmt.Sprintf("%s:%d", cmp.Or(ev.Location.File, "query"), ev.Location.Row)
		}
		text := cmp.Or(ev.Rule, ev.Query)
		if ev.Message != "" {
			text = fmt.Sprintf("%q", ev.Message)
		}
		fmt.Fprintf(w, "  %-28s %s%s %s\n", loc, strings.Repeat("| ", max(ev.Depth-1, 0)), ev.Op, text)
	}
}

// inspectResult is the JSON document of `avfs policy inspect`.
type inspectResult struct {
	Bundles []inspectBundle `json:"bundles"`
	Rules   []bundles.Rule  `json:"rules"`
}

type inspectBundle struct {
	wire.BundleInfo
	Signed   bool `json:"signed"`
	Verified bool `json:"verified"`
	Modules  int  `json:"modules"`
}

func policyInspectCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "list the bundles loaded and their rules",
		UsageText: "avfs policy inspect [--bundle DIR|FILE.tar.gz]… [--verification-key KEY] [--no-default-bundle]",
		Flags:     bundleFlags(),
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usageError("policy inspect takes no arguments")
			}
			_, set, err := e.loadPolicy(c)
			if err != nil {
				return err
			}
			out := inspectResult{Rules: set.Rules()}
			if out.Rules == nil {
				out.Rules = []bundles.Rule{}
			}
			for _, b := range set.Bundles {
				out.Bundles = append(out.Bundles, inspectBundle{BundleInfo: b.Info(), Signed: b.Signed, Verified: b.Verified, Modules: len(b.Bundle.Modules)})
			}
			return e.emit(out, func(w io.Writer) error {
				rows := make([]string, 0, len(out.Bundles))
				for _, b := range out.Bundles {
					sig := "unsigned"
					if b.Verified {
						sig = "verified"
					} else if b.Signed {
						sig = "signed, not verified"
					}
					rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%d\t%s", b.Name, cmp.Or(b.Revision, "-"), strings.Join(b.Roots, " "), b.Modules, sig))
				}
				if err := table(w, "BUNDLE\tREVISION\tROOTS\tMODULES\tSIGNATURE", rows); err != nil {
					return err
				}
				fmt.Fprintln(w)
				rows = rows[:0]
				for _, r := range out.Rules {
					rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s:%d", cmp.Or(r.ID, "-"), cmp.Or(r.Decision, "-"), r.Title, r.File, r.Row))
				}
				return table(w, "RULE\tDECISION\tTITLE\tLOCATION", rows)
			})
		},
	}
}

// testResult is the JSON document of `avfs policy test`.
type testResult struct {
	// DefaultBundle says whether the default bundle was loaded with the
	// files given (not when they define its packages themselves).
	DefaultBundle bool           `json:"default_bundle"`
	Passed        int            `json:"passed"`
	Failed        int            `json:"failed"`
	Errors        int            `json:"errors"`
	Skipped       int            `json:"skipped"`
	Tests         []testCase     `json:"tests"`
	Coverage      *coverageTotal `json:"coverage,omitempty"`
}

type testCase struct {
	Package    string              `json:"package"`
	Name       string              `json:"name"`
	Result     string              `json:"result"` // pass, fail, error or skip
	Location   *wire.TraceLocation `json:"location,omitempty"`
	Error      string              `json:"error,omitempty"`
	DurationUS int64               `json:"duration_us"`
	Output     string              `json:"output,omitempty"` // print() output
	Trace      []wire.TraceEvent   `json:"trace,omitempty"`  // with --verbose, for failures
}

type coverageTotal struct {
	Percent float64                 `json:"percent"`
	Files   map[string]coverageFile `json:"files"`
}

type coverageFile struct {
	Percent         float64 `json:"percent"`
	CoveredLines    int     `json:"covered_lines"`
	NotCoveredLines []int   `json:"not_covered_lines"`
}

func policyTestCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "test",
		Usage:     "run Rego tests against the policy",
		UsageText: "avfs policy test [PATH…] [--coverage] [--verbose] [--run REGEX] [--no-default-bundle]",
		Description: `Runs the test_ rules of the Rego files and directories given (data.json
and data.yaml files in them are loaded too) together with the default bundle
embedded in avfs, unless --no-default-bundle or the files given define
packages under its root (data.avfs: a copy of policies/ being changed, tested
as opa test policies tests/rego would). Without PATH only the default
bundle is loaded, which has no tests. Prints one PASS or FAIL line a test and
exits 2 when a test fails. --coverage reports the coverage of the policy
(non-test) files given, or of the default bundle when only tests are given.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "coverage", Usage: "report which lines of the policy the tests cover"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "print print() output and the trace of failing tests"},
			&cli.StringFlag{Name: "run", Aliases: []string{"r"}, Usage: "run only the tests whose name matches `REGEX`"},
			&cli.BoolFlag{Name: "no-default-bundle", Usage: "do not load the default bundle embedded in avfs"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(e.home)
			if err != nil {
				return err
			}
			res, err := runPolicyTests(c.Context, c.Args().Slice(), testOptions{
				includeDefault:        !c.Bool("no-default-bundle"),
				allowNondeterministic: cfg.Policy.AllowNondeterministic,
				coverage:              c.Bool("coverage"),
				verbose:               c.Bool("verbose"),
				run:                   c.String("run"),
			})
			if err != nil {
				return err
			}
			if err := e.emit(res, func(w io.Writer) error { return printTests(w, res, c.Bool("verbose")) }); err != nil {
				return err
			}
			if res.Failed > 0 || res.Errors > 0 {
				return &exitStatus{code: wire.ExitUsage}
			}
			return nil
		},
	}
}

type testOptions struct {
	includeDefault        bool
	allowNondeterministic bool // policy.allow_nondeterministic
	coverage              bool
	verbose               bool
	run                   string
}

// runPolicyTests runs the tests of paths with OPA's tester, in process.
func runPolicyTests(ctx context.Context, paths []string, opts testOptions) (testResult, error) {
	res := testResult{Tests: []testCase{}}
	loaded := &loader.Result{Documents: map[string]any{}, Modules: map[string]*loader.RegoFile{}}
	if len(paths) > 0 {
		var err error
		loaded, err = loader.NewFileLoader().
			WithProcessAnnotation(true).
			WithRegoVersion(ast.RegoV1).
			Filtered(paths, nil)
		if err != nil {
			e := wire.Errorf(wire.CodeBundleInvalid, "load tests: %w", err)
			if loc := bundles.Location(err); loc != nil {
				e.With("file", loc.File).With("row", loc.Row).With("col", loc.Col)
			}
			return res, e
		}
	}
	modules := loaded.ParsedModules()
	// Coverage is reported for the policy modules of paths, or for the
	// default bundle when paths hold only tests.
	covered := map[string]*ast.Module{}
	for name, m := range modules {
		if !strings.HasSuffix(name, "_test.rego") {
			covered[name] = m
		}
	}
	coverDefault := len(covered) == 0
	var def *bundles.Bundle
	if opts.includeDefault {
		var err error
		if def, err = bundles.Default(); err != nil {
			return res, err
		}
		// Files that define packages of the default bundle (a copy of
		// policies/ being changed) take its place, as with opa test.
		if replacesDefault(covered, def) {
			def = nil
		}
	}
	res.DefaultBundle = def != nil
	// The tests are compiled as the policy is (engine.NewPolicy): without
	// the builtins it refuses, unless the config allows them.
	compiler := ast.NewCompiler().
		WithCapabilities(engine.Capabilities(opts.allowNondeterministic)).
		WithEnablePrintStatements(true).
		WithDefaultRegoVersion(ast.RegoV1)
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetModules(modules).
		CapturePrintOutput(true).
		EnableTracing(opts.verbose).
		RaiseBuiltinErrors(true).
		SetDefaultRegoVersion(ast.RegoV1).
		Filter(opts.run)
	if def != nil {
		runner.SetBundles(map[string]*bundle.Bundle{bundles.DefaultName: def.Bundle})
		if coverDefault {
			for _, m := range def.Bundle.Modules {
				covered[m.Path] = m.Parsed
			}
		}
	}
	var cov *cover.Cover
	if opts.coverage {
		cov = cover.New()
		runner.SetCoverageQueryTracer(cov)
	}
	store := inmem.NewFromObjectWithOpts(loaded.Documents, inmem.OptRoundTripOnWrite(false))
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return res, wire.Errorf(wire.CodePolicyError, "run tests: %w", err)
	}
	defer store.Abort(ctx, txn)
	ch, err := runner.SetStore(store).RunTests(ctx, txn)
	if err != nil {
		return res, engine.CompileError("compile tests", err)
	}
	for r := range ch {
		tc := testCase{Package: r.Package, Name: r.Name, DurationUS: r.Duration.Microseconds(), Output: string(r.Output)}
		if r.Location != nil {
			tc.Location = &wire.TraceLocation{File: r.Location.File, Row: r.Location.Row, Col: r.Location.Col}
		}
		switch {
		case r.Skip:
			tc.Result = "skip"
			res.Skipped++
		case r.Error != nil:
			tc.Result, tc.Error = "error", r.Error.Error()
			res.Errors++
		case r.Fail:
			tc.Result = "fail"
			res.Failed++
		default:
			tc.Result = "pass"
			res.Passed++
		}
		if opts.verbose && (r.Fail || r.Error != nil) {
			tc.Trace = engine.Trace(r.Trace, engine.ExplainFails)
		}
		res.Tests = append(res.Tests, tc)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	slices.SortFunc(res.Tests, func(a, b testCase) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name))
	})
	if cov != nil {
		res.Coverage = coverageOf(cov, covered)
	}
	return res, nil
}

// coverageOf reports the coverage of the modules that are not tests.
func coverageOf(cov *cover.Cover, modules map[string]*ast.Module) *coverageTotal {
	policy := map[string]*ast.Module{}
	for name, m := range modules {
		file := name
		if m.Package != nil && m.Package.Location != nil && m.Package.Location.File != "" {
			file = m.Package.Location.File
		}
		if !strings.HasSuffix(file, "_test.rego") {
			policy[file] = m
		}
	}
	report := cov.Report(policy)
	out := &coverageTotal{Percent: 100, Files: map[string]coverageFile{}}
	covered, notCovered := 0, 0
	for file := range policy {
		fr := report.Files[file]
		if fr == nil {
			continue
		}
		cf := coverageFile{Percent: fr.Coverage, CoveredLines: fr.CoveredLines, NotCoveredLines: []int{}}
		for _, rng := range fr.NotCovered {
			for row := rng.Start.Row; row <= rng.End.Row; row++ {
				cf.NotCoveredLines = append(cf.NotCoveredLines, row)
			}
		}
		slices.Sort(cf.NotCoveredLines)
		cf.NotCoveredLines = slices.Compact(cf.NotCoveredLines)
		out.Files[file] = cf
		covered, notCovered = covered+fr.CoveredLines, notCovered+fr.NotCoveredLines
	}
	if covered+notCovered > 0 {
		out.Percent = math.Round(10000*float64(covered)/float64(covered+notCovered)) / 100
	}
	return out
}

// replacesDefault is true when a policy module defines a package under a
// root of the default bundle (data.avfs).
func replacesDefault(modules map[string]*ast.Module, def *bundles.Bundle) bool {
	if def.Bundle.Manifest.Roots == nil {
		return false
	}
	for _, root := range *def.Bundle.Manifest.Roots {
		prefix := ast.MustParseRef("data." + root)
		for _, m := range modules {
			if m.Package.Path.HasPrefix(prefix) {
				return true
			}
		}
	}
	return false
}

func printTests(w io.Writer, res testResult, verbose bool) error {
	if len(res.Tests) == 0 {
		fmt.Fprintln(w, "no tests found")
	}
	for _, tc := range res.Tests {
		loc := ""
		if tc.Location != nil {
			loc = fmt.Sprintf("  (%s:%d)", tc.Location.File, tc.Location.Row)
		}
		fmt.Fprintf(w, "%-5s %s.%s %s%s\n", strings.ToUpper(tc.Result), tc.Package, tc.Name, time.Duration(tc.DurationUS)*time.Microsecond, loc)
		if tc.Error != "" {
			fmt.Fprintf(w, "      %s\n", tc.Error)
		}
		if verbose && tc.Output != "" {
			for _, line := range strings.Split(strings.TrimRight(tc.Output, "\n"), "\n") {
				fmt.Fprintf(w, "      | %s\n", line)
			}
		}
		if verbose && len(tc.Trace) > 0 {
			printTrace(w, tc.Trace)
		}
	}
	if res.Coverage != nil {
		fmt.Fprintln(w, "coverage:")
		for _, file := range slices.Sorted(maps.Keys(res.Coverage.Files)) {
			cf := res.Coverage.Files[file]
			line := fmt.Sprintf("  %6.2f%%  %s", cf.Percent, file)
			if len(cf.NotCoveredLines) > 0 {
				line += fmt.Sprintf("  (not covered: %s)", lineRanges(cf.NotCoveredLines))
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintf(w, "  %6.2f%%  total\n", res.Coverage.Percent)
	}
	fmt.Fprintf(w, "%d passed, %d failed", res.Passed, res.Failed+res.Errors)
	if res.Skipped > 0 {
		fmt.Fprintf(w, ", %d skipped", res.Skipped)
	}
	fmt.Fprintln(w)
	return nil
}

// lineRanges formats sorted line numbers as "3-5, 9".
func lineRanges(rows []int) string {
	var parts []string
	for i := 0; i < len(rows); {
		j := i
		for j+1 < len(rows) && rows[j+1] == rows[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(rows[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", rows[i], rows[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
