package vault

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"avfs/wire"
)

// decisionsSQL is the decisions table and its limits (schema version 5):
// part of a new vault's schema and, whole, the migration from version 3,
// so that it can be renumbered as one piece.
//
// Every decision the policy made about a run of the vault is a row:
// decision_id (random, unique, the envelope's decision_id), when, which
// way it came (wire.DecisionSource), the command as asked, the decision,
// its reason ids and bundles (JSON), and the input document the policy
// saw, compressed (input_format says how: decisionInputFormat). The
// limits are settings of the vault, like retention's: at most
// decisions_max rows (0: record nothing) and none older than
// decisions_max_age_s seconds (0: no age limit), enforced in the
// transaction that records (see RecordDecision).
const decisionsSQL = `
CREATE TABLE decisions (
	id           INTEGER PRIMARY KEY,
	decision_id  TEXT    NOT NULL UNIQUE,
	time_ns      INTEGER NOT NULL,
	source       TEXT    NOT NULL,
	command      TEXT    NOT NULL,
	decision     TEXT    NOT NULL,
	reasons      TEXT    NOT NULL, -- JSON: the reason ids, highest decision first
	bundles      TEXT    NOT NULL, -- JSON: [{name, revision, roots}]
	input_format TEXT    NOT NULL, -- how input is stored: 'json+deflate'
	input        BLOB    NOT NULL
);
CREATE INDEX decisions_time ON decisions(time_ns);
ALTER TABLE state ADD COLUMN decisions_max INTEGER NOT NULL DEFAULT ` + defaultDecisionsMax + `;
ALTER TABLE state ADD COLUMN decisions_max_age_s INTEGER NOT NULL DEFAULT ` + defaultDecisionsMaxAgeS + `;
`

// The limits of a new vault's decisions (and of one migrated to schema
// version 5), as SQL literals for the schema.
const (
	defaultDecisionsMax     = "10000"
	defaultDecisionsMaxAgeS = "2592000" // 30 days
)

// decisionInputFormat is how a decision's input document is stored: its
// JSON compressed with DEFLATE (RFC 1951). Measured on the documents
// Parse builds: `ls` is 1.3 KB of JSON, 470 bytes deflated; a pipeline
// of four commands with a redirect 3 KB, 780 bytes (the keys repeat for
// every command and path). 10,000 decisions then take about 6 MB instead
// of 20.
const decisionInputFormat = "json+deflate"

// maxDecisionInput bounds the input document a stored decision inflates
// to, so that a damaged or forged row cannot exhaust memory.
const maxDecisionInput = 64 << 20

// DecisionLimits bounds the decisions a vault keeps.
type DecisionLimits struct {
	// Max is the most decisions kept, the newest; 0 records none.
	Max int64 `json:"max"`
	// MaxAgeS removes decisions older than this many seconds; 0 keeps
	// them whatever their age (within Max).
	MaxAgeS int64 `json:"max_age_s"`
}

// DefaultDecisionLimits is what a new vault keeps: 10,000 decisions, 30
// days.
func DefaultDecisionLimits() DecisionLimits {
	return DecisionLimits{Max: 10000, MaxAgeS: 30 * 24 * 3600}
}

// DecisionRecord is a recorded decision.
type DecisionRecord = wire.DecisionRecord

// RecordDecision records rec in one write transaction that also removes
// what the vault's DecisionLimits no longer allow: the decisions older
// than MaxAgeS and the oldest beyond Max (by the order recorded). The
// cost is that of an insert and of the deletes, through the time index and
// the row ids: no scan. rec.Time is the time recorded (now when zero);
// rec.Vault is not stored (the vault is the one recording). With Max 0
// nothing is recorded, and no error is returned.
//
// It fails with invalid_input for a record without a decision id, a
// valid decision or an input, already_exists for a decision id recorded
// before, and with the storage errors of any write (vault_busy,
// no_space …). It never changes a decision: the caller decides what a
// failure to record means.
func (v *Vault) RecordDecision(ctx context.Context, rec DecisionRecord) error {
	if rec.DecisionID == "" || !rec.Decision.Valid() || rec.Input == nil {
		return wire.Errorf(wire.CodeInvalidInput, "record decision: a decision id, one of the four decisions and the input are required")
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	input, err := encodeDecisionInput(rec.Input)
	if err != nil {
		return wire.Errorf(wire.CodeInternal, "record decision: %w", err)
	}
	reasons, err := json.Marshal(nonNil(rec.Reasons))
	if err != nil {
		return wire.Errorf(wire.CodeInternal, "record decision: %w", err)
	}
	bundles, err := json.Marshal(nonNil(rec.Bundles))
	if err != nil {
		return wire.Errorf(wire.CodeInternal, "record decision: %w", err)
	}
	return v.update(ctx, "record decision", func(t *txn) error {
		lim, err := decisionLimits(ctx, t.tx)
		if err != nil {
			return err
		}
		if lim.Max == 0 {
			return nil
		}
		var n int
		if err := t.tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM decisions WHERE decision_id = ?", rec.DecisionID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return wire.Errorf(wire.CodeAlreadyExists, "decision %s is recorded already", rec.DecisionID).With("decision_id", rec.DecisionID)
		}
		res, err := t.tx.ExecContext(ctx, `INSERT INTO decisions (decision_id, time_ns, source, command, decision, reasons, bundles, input_format, input)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, rec.DecisionID, rec.Time.UnixNano(), string(rec.Source), rec.Command, string(rec.Decision),
			string(reasons), string(bundles), decisionInputFormat, input)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		return pruneDecisions(ctx, t.tx, lim, id, t.now)
	})
}

// pruneDecisions removes, in q, the decisions lim no longer allows, as of
// now (ns), newest being the id of the newest row. Rows are removed by id
// below newest-Max+1: ids only grow, so that keeps at most Max rows (fewer
// when rows in between went by age).
func pruneDecisions(ctx context.Context, q querier, lim DecisionLimits, newest, now int64) error {
	if lim.MaxAgeS > 0 {
		if _, err := q.ExecContext(ctx, "DELETE FROM decisions WHERE time_ns < ?", now-lim.MaxAgeS*int64(time.Second)); err != nil {
			return err
		}
	}
	if lim.Max > 0 {
		if _, err := q.ExecContext(ctx, "DELETE FROM decisions WHERE id <= ?", newest-lim.Max); err != nil {
			return err
		}
	}
	return nil
}

func decisionLimits(ctx context.Context, q querier) (DecisionLimits, error) {
	var lim DecisionLimits
	err := q.QueryRowContext(ctx, "SELECT decisions_max, decisions_max_age_s FROM state WHERE id = 1").Scan(&lim.Max, &lim.MaxAgeS)
	return lim, err
}

// DecisionLimits returns the vault's limits on recorded decisions.
func (v *Vault) DecisionLimits(ctx context.Context) (DecisionLimits, error) {
	var lim DecisionLimits
	err := v.view(ctx, "decision limits", func(q querier, _ state) error {
		var err error
		lim, err = decisionLimits(ctx, q)
		return err
	})
	return lim, err
}

// SetDecisionLimits sets the vault's limits on recorded decisions (nil
// keeps a setting) and applies them at once, in the same transaction. It
// fails with invalid_input on a negative setting.
func (v *Vault) SetDecisionLimits(ctx context.Context, maxCount, maxAgeS *int64) (DecisionLimits, error) {
	var lim DecisionLimits
	for _, p := range []*int64{maxCount, maxAgeS} {
		if p != nil && *p < 0 {
			return lim, wire.Errorf(wire.CodeInvalidInput, "set decision limits: limits must be 0 or positive")
		}
	}
	err := v.update(ctx, "set decision limits", func(t *txn) error {
		var err error
		if lim, err = decisionLimits(ctx, t.tx); err != nil {
			return err
		}
		if maxCount != nil {
			lim.Max = *maxCount
		}
		if maxAgeS != nil {
			lim.MaxAgeS = *maxAgeS
		}
		if _, err := t.tx.ExecContext(ctx, "UPDATE state SET decisions_max = ?, decisions_max_age_s = ? WHERE id = 1", lim.Max, lim.MaxAgeS); err != nil {
			return err
		}
		t.audit("decisions.limits", "/", map[string]any{"max": lim.Max, "max_age_s": lim.MaxAgeS})
		if lim.Max == 0 {
			_, err := t.tx.ExecContext(ctx, "DELETE FROM decisions")
			return err
		}
		var newest int64
		if err := t.tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM decisions").Scan(&newest); err != nil {
			return err
		}
		return pruneDecisions(ctx, t.tx, lim, newest, t.now)
	})
	return lim, err
}

// DecisionQuery selects recorded decisions.
type DecisionQuery struct {
	Since   time.Time // recorded at or after (zero: all)
	AfterID int64     // with a row id above (paging: the Next of the last page)
	Limit   int       // at most this many (0: all)
}

// DecisionPage is a page of recorded decisions, oldest first.
type DecisionPage struct {
	Records []DecisionRecord
	// Next is the AfterID of the next page; 0 when this one is the last.
	Next int64
}

// Decisions returns the recorded decisions q selects, oldest first, each
// with Vault set to the vault's name. It reads one snapshot. A row whose
// input cannot be read back (damaged, an unknown input_format) is an
// integrity error naming its decision id.
func (v *Vault) Decisions(ctx context.Context, q DecisionQuery) (DecisionPage, error) {
	var page DecisionPage
	err := v.view(ctx, "decisions", func(qr querier, st state) error {
		query := `SELECT id, decision_id, time_ns, source, command, decision, reasons, bundles, input_format, input FROM decisions
			WHERE id > ? AND time_ns >= ? ORDER BY id`
		args := []any{q.AfterID, int64(0)}
		if !q.Since.IsZero() {
			args[1] = q.Since.UnixNano()
		}
		if q.Limit > 0 {
			query += fmt.Sprintf(" LIMIT %d", q.Limit+1)
		}
		rows, err := qr.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var last int64
		for rows.Next() {
			if q.Limit > 0 && len(page.Records) == q.Limit {
				page.Next = last
				break
			}
			var rec DecisionRecord
			var timeNS int64
			var source, decision, reasons, bundles, format string
			var input []byte
			if err := rows.Scan(&last, &rec.DecisionID, &timeNS, &source, &rec.Command, &decision, &reasons, &bundles, &format, &input); err != nil {
				return err
			}
			rec.Time, rec.Source, rec.Decision, rec.Vault = time.Unix(0, timeNS), wire.DecisionSource(source), wire.Decision(decision), st.name
			if err := json.Unmarshal([]byte(reasons), &rec.Reasons); err != nil {
				return damagedDecision(rec.DecisionID, "reasons", err)
			}
			if err := json.Unmarshal([]byte(bundles), &rec.Bundles); err != nil {
				return damagedDecision(rec.DecisionID, "bundles", err)
			}
			if rec.Input, err = decodeDecisionInput(format, input); err != nil {
				return damagedDecision(rec.DecisionID, "input", err)
			}
			page.Records = append(page.Records, rec)
		}
		return rows.Err()
	})
	return page, err
}

// CountDecisions returns how many decisions the vault holds.
func (v *Vault) CountDecisions(ctx context.Context) (int64, error) {
	var n int64
	err := v.view(ctx, "count decisions", func(q querier, _ state) error {
		return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM decisions").Scan(&n)
	})
	return n, err
}

func damagedDecision(id, what string, err error) error {
	return wire.Errorf(wire.CodeIntegrity, "decision %s: its %s cannot be read: %v", id, what, err).With("decision_id", id)
}

func encodeDecisionInput(in *wire.Input) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := json.NewEncoder(zw).Encode(in); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeDecisionInput(format string, data []byte) (*wire.Input, error) {
	if format != decisionInputFormat {
		return nil, fmt.Errorf("unknown input format %q", format)
	}
	zr := flate.NewReader(bytes.NewReader(data))
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, maxDecisionInput+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxDecisionInput {
		return nil, fmt.Errorf("the input inflates to more than %d bytes", maxDecisionInput)
	}
	var in wire.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
