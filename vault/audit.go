package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"avfs/wire"
)

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID      int64          `json:"id"`
	Time    time.Time      `json:"time"`
	Op      string         `json:"op"`
	Path    string         `json:"path"`
	Details map[string]any `json:"details"`
	Actor   string         `json:"actor"`
}

// AuditQuery filters Audit.
type AuditQuery struct {
	Limit int       // newest Limit entries (0: all)
	Since time.Time // entries at or after Since
}

// Audit returns audit entries, oldest first.
func (v *Vault) Audit(ctx context.Context, aq AuditQuery) ([]AuditEntry, error) {
	out := []AuditEntry{}
	err := v.view(ctx, "read audit log", func(q querier, _ state) error {
		query := "SELECT id, time_ns, op, path, details, actor FROM audit WHERE time_ns >= ? ORDER BY id DESC"
		args := []any{aq.Since.UnixNano()}
		if aq.Since.IsZero() {
			args[0] = int64(0)
		}
		if aq.Limit > 0 {
			query += " LIMIT ?"
			args = append(args, aq.Limit)
		}
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e AuditEntry
			var ns int64
			var details string
			if err := rows.Scan(&e.ID, &ns, &e.Op, &e.Path, &details, &e.Actor); err != nil {
				return err
			}
			e.Time = time.Unix(0, ns)
			if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
				e.Details = map[string]any{"raw": details}
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}

// AuditReport is the result of VerifyAudit.
type AuditReport struct {
	OK       bool    `json:"ok"`
	Entries  int64   `json:"entries"`
	Problems []Issue `json:"problems"`
}

// VerifyAudit recomputes the hash chain and reports every row that was
// edited, removed or reordered.
func (v *Vault) VerifyAudit(ctx context.Context) (AuditReport, error) {
	rep := AuditReport{Problems: []Issue{}}
	err := v.view(ctx, "verify audit log", func(q querier, st state) error {
		var err error
		rep.Problems, rep.Entries, err = verifyAuditChain(ctx, q, st)
		return err
	})
	rep.OK = err == nil && len(rep.Problems) == 0
	return rep, err
}

func verifyAuditChain(ctx context.Context, q querier, st state) ([]Issue, int64, error) {
	rows, err := q.QueryContext(ctx, "SELECT id, time_ns, op, path, details, actor, prev_hash, hash FROM audit ORDER BY id")
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	problems := []Issue{}
	prev := make([]byte, 32)
	var n, lastID int64
	for rows.Next() {
		var id, ns int64
		var op, path, details, actor string
		var prevHash, hash []byte
		if err := rows.Scan(&id, &ns, &op, &path, &details, &actor, &prevHash, &hash); err != nil {
			return nil, n, err
		}
		n++
		if id != lastID+1 {
			problems = append(problems, Issue{Check: "audit_chain", Message: "audit rows are missing before this one", Ref: id})
		}
		if !bytes.Equal(prevHash, prev) {
			problems = append(problems, Issue{Check: "audit_chain", Message: "previous-hash link is broken (a row before it was changed or removed)", Ref: id})
		}
		if !bytes.Equal(auditHash(prevHash, id, ns, op, path, details, actor), hash) {
			problems = append(problems, Issue{Check: "audit_chain", Message: "row content does not match its hash (it was edited)", Ref: id})
		}
		prev, lastID = hash, id
	}
	if err := rows.Err(); err != nil {
		return nil, n, err
	}
	if lastID != st.auditID || (st.auditID > 0 && !bytes.Equal(prev, []byte(st.auditHash))) {
		problems = append(problems, Issue{Check: "audit_chain", Message: fmt.Sprintf("the log ends at row %d but the vault recorded row %d as its last (rows were removed from the end, or the head was edited)", lastID, st.auditID)})
	}
	return problems, n, nil
}

// auditError is returned by commands that verify and find problems.
func auditError(rep AuditReport) error {
	if rep.OK {
		return nil
	}
	return wire.Errorf(wire.CodeIntegrity, "audit log verification failed: %d problem(s)", len(rep.Problems)).With("problems", rep.Problems)
}

// Event appends one audit row for something that happened around the vault
// (a run's decision and outcome) without changing anything else.
func (v *Vault) Event(ctx context.Context, op, path string, details map[string]any) error {
	return v.update(ctx, op, func(t *txn) error {
		t.audit(op, path, details)
		return nil
	})
}
