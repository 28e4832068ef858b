package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/bundles"
	"avfs/engine"
	"avfs/vault"
	"avfs/wire"
)

// exitReplayFailed is the status of `avfs policy replay` when a change is
// one --fail-on fails on: 2, as `avfs policy test` when a test fails (1
// is an error: a bundle that does not load, a corpus line that is not
// one).
const exitReplayFailed = 2

// replayPage is how many recorded decisions are read from a vault at once.
const replayPage = 500

// replayOptions is what `avfs policy replay` replays, and against what.
type replayOptions struct {
	next    *engine.Policy // the policy with the new bundles
	current func(context.Context) (*engine.Policy, error)
	store   *vault.Store
	vaults  []string // the vaults to replay (none with a corpus)
	corpus  string   // the corpus file; "" for vaults
	since   time.Time
	against wire.ReplayBaseline
	failOn  wire.ReplayFailOn
}

func policyReplayCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "re-decide recorded decisions with other bundles and report what would change",
		UsageText: `avfs policy replay [--bundle DIR|FILE.tar.gz]… [--verification-key KEY] [--no-default-bundle]
                   [--vault NAME | --all | --corpus FILE.jsonl] [--since TIME]
                   [--against recorded|current] [--fail-on looser|any|none]`,
		Description: `Every decision avfs makes about a run is recorded in the vault, with the
input document the policy saw. replay evaluates those inputs with the
bundles given, loaded as avfs policy eval loads them (the config's, then
every --bundle), and reports each decision that would change: its id,
time, command, from → to and the rule ids before and after, and totals by
class. --against recorded (the default) compares with the decision
recorded; --against current with what the current policy (the config's
bundles, without --bundle) decides now. It replays the selected vault
(--vault), --all vaults, or a --corpus of JSON lines (decision records,
or bare input documents, whose baseline is the current policy's).
--since keeps the decisions recorded since TIME (RFC 3339, or a duration
such as 24h: that long ago). It exits 2 when a change is one --fail-on fails on: looser
(the default: a decision lower in the lattice allow <
allow_with_checkpoint < require_approval < deny), any, or none.`,
		Flags: append(bundleFlags(),
			&cli.BoolFlag{Name: "all", Usage: "replay every vault of the store"},
			&cli.StringFlag{Name: "corpus", Usage: "replay the decision records or input documents of `FILE.jsonl`, one a line"},
			&cli.StringFlag{Name: "since", Usage: "replay the decisions recorded since `TIME` (RFC 3339, or a duration: 24h)"},
			&cli.StringFlag{Name: "against", Value: string(wire.BaselineRecorded), Usage: "compare with the `BASELINE` recorded or current"},
			&cli.StringFlag{Name: "fail-on", Value: string(wire.FailOnLooser), Usage: "exit 2 on changes of `KIND` looser, any or none"},
		),
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usageError("policy replay takes no arguments")
			}
			opts, err := e.replayOptionsOf(c)
			if err != nil {
				return err
			}
			res, err := runReplay(c.Context, opts)
			if err != nil {
				return err
			}
			if err := e.emit(res, func(w io.Writer) error { return printReplay(w, res) }); err != nil {
				return err
			}
			if res.Failed {
				return &exitStatus{code: exitReplayFailed}
			}
			return nil
		},
	}
}

// replayOptionsOf reads the flags of `avfs policy replay` and loads the
// new policy.
func (e *env) replayOptionsOf(c *cli.Context) (replayOptions, error) {
	opts := replayOptions{against: wire.ReplayBaseline(c.String("against")), failOn: wire.ReplayFailOn(c.String("fail-on")), corpus: c.String("corpus")}
	switch opts.against {
	case wire.BaselineRecorded, wire.BaselineCurrent:
	default:
		return opts, usageError("unknown --against %q (want recorded or current)", opts.against)
	}
	switch opts.failOn {
	case wire.FailOnLooser, wire.FailOnAny, wire.FailOnNone:
	default:
		return opts, usageError("unknown --fail-on %q (want looser, any or none)", opts.failOn)
	}
	// --vault is avfs's own flag (or AVFS_VAULT): the vault selected.
	named, all := e.vault != "", c.Bool("all")
	if (named && all) || (opts.corpus != "" && (named || all)) {
		return opts, usageError("policy replay replays --vault NAME, --all or --corpus FILE: one of them")
	}
	if s := c.String("since"); s != "" {
		var err error
		if opts.since, err = parseSince(s, time.Now()); err != nil {
			return opts, err
		}
	}
	cfg, err := loadConfig(e.home)
	if err != nil {
		return opts, err
	}
	opts.store = e.readStore()
	switch {
	case all:
		if opts.vaults, err = opts.store.Names(); err != nil {
			return opts, err
		}
	case opts.corpus == "":
		opts.vaults = []string{e.vaultName()}
	}
	if opts.next, _, err = e.policyOf(c.Context, e.bundleOptionsOf(c, cfg), opaConfigPath(c, cfg), cfg); err != nil {
		return opts, fmt.Errorf("load the new bundles: %w", err)
	}
	opts.current = func(ctx context.Context) (*engine.Policy, error) {
		p, _, err := e.policyOf(ctx, bundles.Options{IncludeDefault: !cfg.Policy.NoDefaultBundle, HomePolicyDir: filepath.Join(e.home, "policy"),
			Paths: cfg.Policy.Bundles, VerificationKey: cfg.Policy.VerificationKey}, cfg.Policy.OPAConfig, cfg)
		if err != nil {
			return nil, fmt.Errorf("load the current policy: %w", err)
		}
		return p, nil
	}
	return opts, nil
}

// runReplay replays what opts selects: the current policy is loaded only
// when a baseline needs it (--against current, or a corpus, whose bare
// inputs have no decision recorded). An unknown vault is
// vault_not_found, a corpus that cannot be read invalid_input (a line
// that is not one names its line).
func runReplay(ctx context.Context, opts replayOptions) (wire.ReplayResult, error) {
	eopts := engine.ReplayOptions{Against: opts.against, FailOn: opts.failOn, Since: opts.since}
	if opts.against == wire.BaselineCurrent || opts.corpus != "" {
		var err error
		if eopts.Current, err = opts.current(ctx); err != nil {
			return wire.ReplayResult{}, err
		}
	}
	if opts.corpus != "" {
		f, err := os.Open(opts.corpus)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return wire.ReplayResult{}, wire.Errorf(wire.CodeInvalidInput, "replay: no corpus file %s", opts.corpus)
			}
			return wire.ReplayResult{}, wire.Errorf(wire.CodeHostIO, "replay: %w", err)
		}
		defer f.Close()
		eopts.Sources = []string{opts.corpus}
		return engine.Replay(ctx, opts.next, engine.ReadCorpus(f, opts.corpus), eopts)
	}
	eopts.Sources = opts.vaults
	return engine.Replay(ctx, opts.next, vaultDecisions(ctx, opts.store, opts.vaults, opts.since), eopts)
}

// vaultDecisions yields the decisions recorded since since in each vault
// of names, in turn, oldest first, a page at a time; each vault is open
// only while its decisions are replayed.
func vaultDecisions(ctx context.Context, store *vault.Store, names []string, since time.Time) iter.Seq2[engine.ReplayItem, error] {
	return func(yield func(engine.ReplayItem, error) bool) {
		for _, name := range names {
			if !vaultPages(ctx, store, name, since, yield) {
				return
			}
		}
	}
}

// vaultPages yields the decisions of the vault name; false when the
// consumer stopped or an error was yielded.
func vaultPages(ctx context.Context, store *vault.Store, name string, since time.Time, yield func(engine.ReplayItem, error) bool) bool {
	v, err := store.Open(ctx, name)
	if err != nil {
		yield(engine.ReplayItem{}, fmt.Errorf("replay: %w", err))
		return false
	}
	defer v.Close()
	q := vault.DecisionQuery{Since: since, Limit: replayPage}
	for {
		page, err := v.Decisions(ctx, q)
		if err != nil {
			yield(engine.ReplayItem{}, fmt.Errorf("replay vault %s: %w", name, err))
			return false
		}
		for _, rec := range page.Records {
			if !yield(engine.ReplayItem{Record: rec}, nil) {
				return false
			}
		}
		if page.Next == 0 {
			return true
		}
		q.AfterID = page.Next
	}
}

// printReplay prints a replay for people: a line a change, the totals,
// and the verdict.
func printReplay(w io.Writer, r wire.ReplayResult) error {
	var names []string
	for _, b := range r.Bundles {
		names = append(names, bundleLabel(b))
	}
	against := "the decisions recorded"
	if r.Against == wire.BaselineCurrent {
		against = "the current policy"
	}
	fmt.Fprintf(w, "replayed %d decisions of %s with %s, against %s\n", r.Replayed, cmp.Or(strings.Join(r.Sources, ", "), "nothing"), strings.Join(names, ", "), against)
	if len(r.Changes) == 0 {
		fmt.Fprintln(w, "no decision would change")
		return nil
	}
	rows := make([]string, 0, len(r.Changes))
	for _, ch := range r.Changes {
		at := "-"
		if ch.Time != nil {
			at = ch.Time.Format(time.RFC3339)
		}
		id := cmp.Or(ch.DecisionID, "-")
		if ch.Line > 0 {
			id = fmt.Sprintf("%s (line %d)", id, ch.Line)
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s → %s\t%s → %s\t%s", id, at, cmp.Or(string(ch.Source), "-"), ch.From, ch.To,
			cmp.Or(strings.Join(ch.ReasonsFrom, ","), "-"), cmp.Or(strings.Join(ch.ReasonsTo, ","), "-"), oneLine(ch.Command)))
	}
	if err := table(w, "DECISION\tTIME\tSOURCE\tFROM → TO\tRULES\tCOMMAND", rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "totals:")
	for _, t := range r.Totals {
		fmt.Fprintf(w, "  %s → %s (%s): %d\n", t.From, t.To, t.Kind, t.Count)
	}
	verdict := "passes"
	if r.Failed {
		verdict = "fails"
	}
	fmt.Fprintf(w, "%d looser, %d stricter, %d for other rules: %s --fail-on %s\n", r.Looser, r.Stricter, r.Reasons, verdict, r.FailOn)
	return nil
}

// oneLine shows a command on one line of a table.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
}
