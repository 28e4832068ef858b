package engine

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"slices"
	"time"

	"avfs/wire"
)

// Replaying decisions
//
// Replay asks a policy (the new one) about inputs the policy was asked
// before — decisions recorded in vaults, or the lines of a corpus — and
// reports each decision it would make otherwise than a baseline: the
// decision recorded (wire.BaselineRecorded), or what the current policy
// decides for the same input now (wire.BaselineCurrent), which separates
// what the bundle change does from what changed since the decision was
// recorded (an older bundle, other data). A change is classified by the
// lattice of wire.Decision (allow < allow_with_checkpoint <
// require_approval < deny): looser when the new decision is lower,
// stricter when higher, and reasons when the decision is the same but the
// set of reason ids is not.
//
// Recorded inputs are data: replaying one runs nothing and decides
// nothing; its results are only reported. The input is the document the
// policy saw then, so what the parser would do otherwise now (a bundle's
// program specs, data.avfs.programs, classify the words when the command
// is parsed) is not replayed: only the policy's rules and data are.

// ReplayItem is one decision to replay.
type ReplayItem struct {
	// Record is the recorded decision. Its Decision is "" for a bare
	// input of a corpus: its baseline is then the current policy's.
	Record wire.DecisionRecord
	// Line is the corpus line it was read from (0: from a vault).
	Line int
}

// ReplayOptions tune Replay.
type ReplayOptions struct {
	// Against is the baseline; "" is wire.BaselineRecorded.
	Against wire.ReplayBaseline
	// Current is the current policy: it decides the baselines under
	// wire.BaselineCurrent, and those of items without a recorded
	// decision. Nil when not loaded: such an item is then invalid_input.
	Current *Policy
	// FailOn says which changes set the result's Failed; "" is
	// wire.FailOnLooser.
	FailOn wire.ReplayFailOn
	// Since skips the items recorded before it (an item without a time
	// is kept); zero keeps all. Sources names what is replayed, for the
	// report.
	Since   time.Time
	Sources []string
}

// Replay re-evaluates every item with next and compares each decision
// with its baseline (see ReplayOptions), in the order of items. It stops
// at the first error items yields, and fails with invalid_input for an
// unknown baseline or FailOn, an item without an input, a recorded
// decision that is not one of the four, or one that needs the current
// policy when opts.Current is nil. A policy that cannot decide an input
// fails closed (deny, avfs.engine.fail_closed or eval_timeout), which
// is reported as any other decision. It never modifies the items and is
// safe for concurrent use.
func Replay(ctx context.Context, next *Policy, items iter.Seq2[ReplayItem, error], opts ReplayOptions) (wire.ReplayResult, error) {
	against := cmp.Or(opts.Against, wire.BaselineRecorded)
	failOn := cmp.Or(opts.FailOn, wire.FailOnLooser)
	res := wire.ReplayResult{Kind: wire.ReplayKind, Against: against, FailOn: failOn, Bundles: next.Bundles(),
		BaselineBundles: []wire.BundleInfo{}, Sources: slices.Clone(opts.Sources), Changes: []wire.ReplayChange{}, Totals: []wire.ReplayTotal{}}
	if res.Sources == nil {
		res.Sources = []string{}
	}
	if !opts.Since.IsZero() {
		since := opts.Since.UTC()
		res.Since = &since
	}
	switch against {
	case wire.BaselineRecorded, wire.BaselineCurrent:
	default:
		return res, wire.Errorf(wire.CodeInvalidInput, "replay: unknown baseline %q (want recorded or current)", against)
	}
	switch failOn {
	case wire.FailOnLooser, wire.FailOnAny, wire.FailOnNone:
	default:
		return res, wire.Errorf(wire.CodeInvalidInput, "replay: unknown --fail-on %q (want looser, any or none)", failOn)
	}
	usedCurrent := false
	totals := map[wire.ReplayTotal]int{}
	for item, err := range items {
		if err != nil {
			return res, err
		}
		rec := item.Record
		where := "decision " + rec.DecisionID
		if item.Line > 0 {
			where = fmt.Sprintf("line %d", item.Line)
		}
		if rec.Input == nil {
			return res, wire.Errorf(wire.CodeInvalidInput, "replay: %s has no input document", where)
		}
		if rec.Decision != "" && !rec.Decision.Valid() {
			return res, wire.Errorf(wire.CodeInvalidInput, "replay: %s: %q is not a decision", where, rec.Decision)
		}
		if !opts.Since.IsZero() && !rec.Time.IsZero() && rec.Time.Before(opts.Since) {
			continue
		}
		from, reasonsFrom := rec.Decision, slices.Clone(rec.Reasons)
		if against == wire.BaselineCurrent || rec.Decision == "" {
			if opts.Current == nil {
				return res, wire.Errorf(wire.CodeInvalidInput, "replay: %s records no decision: replay it against the current policy", where)
			}
			base, err := opts.Current.Decide(ctx, rec.Input, DecideOptions{})
			if err != nil {
				return res, err
			}
			from, reasonsFrom, usedCurrent = base.Decision, replayReasonIDs(base.Reasons), true
		}
		now, err := next.Decide(ctx, rec.Input, DecideOptions{})
		if err != nil {
			return res, err
		}
		res.Replayed++
		to, reasonsTo := now.Decision, replayReasonIDs(now.Reasons)
		var kind wire.ReplayChangeKind
		switch {
		case to.Rank() < from.Rank():
			kind = wire.ChangeLooser
			res.Looser++
		case to.Rank() > from.Rank():
			kind = wire.ChangeStricter
			res.Stricter++
		case !sameIDs(reasonsFrom, reasonsTo):
			kind = wire.ChangeReasons
			res.Reasons++
		default:
			continue
		}
		if kind == wire.ChangeLooser && failOn != wire.FailOnNone || kind == wire.ChangeStricter && failOn == wire.FailOnAny {
			res.Failed = true
		}
		totals[wire.ReplayTotal{From: from, To: to, Kind: kind}]++
		ch := wire.ReplayChange{DecisionID: rec.DecisionID, Vault: rec.Vault, Line: item.Line, Source: rec.Source, Command: commandText(rec),
			From: from, To: to, Kind: kind, ReasonsFrom: nonNilIDs(reasonsFrom), ReasonsTo: nonNilIDs(reasonsTo),
			Recorded: rec.Decision, RecordedBundles: slices.Clone(rec.Bundles)}
		if !rec.Time.IsZero() {
			at := rec.Time.UTC()
			ch.Time = &at
		}
		if ch.RecordedBundles == nil {
			ch.RecordedBundles = []wire.BundleInfo{}
		}
		res.Changes = append(res.Changes, ch)
	}
	if usedCurrent {
		res.BaselineBundles = opts.Current.Bundles()
	}
	for t, n := range totals {
		t.Count = n
		res.Totals = append(res.Totals, t)
	}
	slices.SortFunc(res.Totals, func(a, b wire.ReplayTotal) int {
		return cmp.Or(cmp.Compare(b.From.Rank(), a.From.Rank()), cmp.Compare(a.To.Rank(), b.To.Rank()))
	})
	return res, nil
}

// commandText is the command of rec as asked, or, for a record without
// one, the input's script or top-level command.
func commandText(rec wire.DecisionRecord) string {
	if rec.Command != "" {
		return rec.Command
	}
	if rec.Input.Script != nil && rec.Input.Script.Source != "" {
		return rec.Input.Script.Source
	}
	return rec.Input.Command.Raw
}

func replayReasonIDs(rs []wire.Reason) []string {
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func nonNilIDs(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// maxCorpusLine bounds a line of a corpus (an input document of a long
// script is large, but not this large).
const maxCorpusLine = 64 << 20

// ReadCorpus reads a corpus of decisions to replay, one JSON object a
// line: a wire.DecisionRecord (an object with "input", as a vault
// records them; "decision" may be left out, or ""), or a bare input
// document (a wire.Input, with "schema_version" 1), whose baseline is the
// current policy's decision. Empty lines and lines starting with "//"
// are skipped. A line that is neither, or longer than 64 MiB, is
// invalid_input naming the line (and source, its name); reading stops
// there.
func ReadCorpus(r io.Reader, source string) iter.Seq2[ReplayItem, error] {
	return func(yield func(ReplayItem, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxCorpusLine)
		line := 0
		for sc.Scan() {
			line++
			text := bytes.TrimSpace(sc.Bytes())
			if len(text) == 0 || bytes.HasPrefix(text, []byte("//")) {
				continue
			}
			item, err := corpusItem(text, line)
			if err != nil {
				yield(item, wire.Errorf(wire.CodeInvalidInput, "replay: %s:%d: %w", source, line, err).With("line", line))
				return
			}
			if !yield(item, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(ReplayItem{}, wire.Errorf(wire.CodeInvalidInput, "replay: %s: after line %d: %w", source, line, err).With("line", line+1))
		}
	}
}

// corpusItem reads one line of a corpus.
func corpusItem(text []byte, line int) (ReplayItem, error) {
	item := ReplayItem{Line: line}
	var shape struct {
		Input         json.RawMessage `json:"input"`
		SchemaVersion *int            `json:"schema_version"`
	}
	if err := json.Unmarshal(text, &shape); err != nil {
		return item, fmt.Errorf("not a JSON object: %w", err)
	}
	switch {
	case len(shape.Input) > 0 && !bytes.Equal(shape.Input, []byte("null")):
		if err := json.Unmarshal(text, &item.Record); err != nil {
			return item, fmt.Errorf("not a decision record: %w", err)
		}
		if item.Record.Decision != "" && !item.Record.Decision.Valid() {
			return item, fmt.Errorf("%q is not a decision", item.Record.Decision)
		}
	case shape.SchemaVersion != nil:
		if *shape.SchemaVersion != wire.InputSchemaVersion {
			return item, fmt.Errorf("input schema_version %d, want %d", *shape.SchemaVersion, wire.InputSchemaVersion)
		}
		var in wire.Input
		if err := json.Unmarshal(text, &in); err != nil {
			return item, fmt.Errorf("not an input document: %w", err)
		}
		item.Record.Input = &in
	default:
		return item, fmt.Errorf(`neither a decision record (with "input") nor an input document (with "schema_version")`)
	}
	if item.Record.Input.SchemaVersion != wire.InputSchemaVersion {
		return item, fmt.Errorf("input schema_version %d, want %d", item.Record.Input.SchemaVersion, wire.InputSchemaVersion)
	}
	return item, nil
}
