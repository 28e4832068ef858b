package vault

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"avfs/wire"
)

// Approval statuses. "expired" is never stored: a pending or granted
// approval past its expiry reads as expired.
const (
	ApprovalPending = "pending"
	ApprovalGranted = "granted"
	ApprovalDenied  = "denied"
	ApprovalUsed    = "used"
	ApprovalExpired = "expired"
)

// ApprovalRequest is what a run that needs approval records.
type ApprovalRequest struct {
	Argv           []string `json:"argv"`
	Shell          string   `json:"shell,omitempty"`
	Cwd            string   `json:"cwd"`
	Env            []string `json:"env,omitempty"`      // --env KEY or KEY=VALUE the run asks for
	Readonly       bool     `json:"readonly,omitempty"` // a --readonly run
	Vault          string   `json:"vault"`
	BundleRevision string   `json:"bundle_revision"`
	Reasons        []string `json:"reasons"` // rule ids that asked for approval
	// Held, set when the effects policy held a run's changes, names where
	// they wait: granting applies them (ApplyHeld), denying discards them.
	Held *HeldRef `json:"held,omitempty"`
	// Preview, set for a previewed run (proxy exec --preview), names the
	// throwaway fork it ran in: granting merges its changes (see
	// Store.SettleApproval), denying deletes it.
	Preview *PreviewRef   `json:"preview,omitempty"`
	Digest  string        `json:"-"` // what the approval is bound to
	TTL     time.Duration `json:"-"`
}

// Approval is a stored approval.
type Approval struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	Digest    string          `json:"digest"`
	Request   ApprovalRequest `json:"request"`
	Reason    string          `json:"reason"`
	DecidedBy string          `json:"decided_by"`
	DecidedAt *time.Time      `json:"decided_at"`
	UsedAt    *time.Time      `json:"used_at"`
	ExecID    string          `json:"exec_id"` // the run that used it
	GrantMAC  string          `json:"-"`
}

const approvalCols = "id, status, created_ns, expires_ns, digest, request, reason, decided_by, decided_ns, grant_mac, used_ns, exec_id"

func scanApproval(sc interface{ Scan(...any) error }, now time.Time) (Approval, error) {
	var a Approval
	var created, expires, decided, used int64
	var req string
	if err := sc.Scan(&a.ID, &a.Status, &created, &expires, &a.Digest, &req, &a.Reason, &a.DecidedBy, &decided, &a.GrantMAC, &used, &a.ExecID); err != nil {
		return a, err
	}
	a.CreatedAt, a.ExpiresAt = time.Unix(0, created), time.Unix(0, expires)
	if decided > 0 {
		t := time.Unix(0, decided)
		a.DecidedAt = &t
	}
	if used > 0 {
		t := time.Unix(0, used)
		a.UsedAt = &t
	}
	_ = json.Unmarshal([]byte(req), &a.Request)
	a.Request.Digest = a.Digest
	if (a.Status == ApprovalPending || a.Status == ApprovalGranted) && now.After(a.ExpiresAt) {
		a.Status = ApprovalExpired
	}
	return a, nil
}

func newApprovalID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ap-" + hex.EncodeToString(b[:])
}

// CreateApproval records a pending approval for req.
func (v *Vault) CreateApproval(ctx context.Context, req ApprovalRequest) (Approval, error) {
	if req.TTL <= 0 {
		return Approval{}, wire.Errorf(wire.CodeInvalidInput, "create approval: the time to live must be positive")
	}
	if req.Argv == nil {
		req.Argv = []string{}
	}
	if req.Reasons == nil {
		req.Reasons = []string{}
	}
	var out Approval
	err := v.update(ctx, "create approval", func(t *txn) error {
		body, err := json.Marshal(req)
		if err != nil {
			return err
		}
		id := newApprovalID()
		expires := t.now + int64(req.TTL)
		if _, err := t.tx.ExecContext(ctx, "INSERT INTO approvals (id, status, created_ns, expires_ns, digest, request) VALUES (?, ?, ?, ?, ?, ?)",
			id, ApprovalPending, t.now, expires, req.Digest, string(body)); err != nil {
			return err
		}
		t.audit("approval.request", req.Cwd, map[string]any{"id": id, "argv": req.Argv, "shell": req.Shell, "reasons": req.Reasons, "expires_ns": expires})
		out, err = scanApproval(t.tx.QueryRowContext(ctx, "SELECT "+approvalCols+" FROM approvals WHERE id = ?", id), time.Unix(0, t.now))
		return err
	})
	return out, err
}

// Approvals lists approvals, newest first; status filters ("" for all).
func (v *Vault) Approvals(ctx context.Context, status string) ([]Approval, error) {
	out := []Approval{}
	now := time.Now()
	err := v.view(ctx, "list approvals", func(q querier, _ state) error {
		rows, err := q.QueryContext(ctx, "SELECT "+approvalCols+" FROM approvals ORDER BY created_ns DESC")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanApproval(rows, now)
			if err != nil {
				return err
			}
			if status == "" || a.Status == status {
				out = append(out, a)
			}
		}
		return rows.Err()
	})
	return out, err
}

func findApproval(ctx context.Context, q querier, id string, now time.Time) (Approval, error) {
	a, err := scanApproval(q.QueryRowContext(ctx, "SELECT "+approvalCols+" FROM approvals WHERE id = ?", id), now)
	if errors.Is(err, sql.ErrNoRows) {
		return a, wire.Errorf(wire.CodeApprovalNotFound, "no approval %q", id).With("approval", id)
	}
	return a, err
}

// Approval returns one approval.
func (v *Vault) Approval(ctx context.Context, id string) (Approval, error) {
	var a Approval
	err := v.view(ctx, "show approval", func(q querier, _ state) error {
		var err error
		a, err = findApproval(ctx, q, id, time.Now())
		return err
	})
	return a, err
}

// DecideApproval grants or denies a pending approval. mac, when the
// approver secret is configured, is the grant's MAC over the approval's
// id and digest (see the runner); by names who decided.
func (v *Vault) DecideApproval(ctx context.Context, id string, grant bool, reason, by, mac string) (Approval, error) {
	var out Approval
	err := v.update(ctx, "decide approval", func(t *txn) error {
		a, err := findApproval(ctx, t.tx, id, time.Unix(0, t.now))
		if err != nil {
			return err
		}
		if a.Status != ApprovalPending {
			return wire.Errorf(wire.CodeApprovalRejected, "approval %s is %s, not pending", id, a.Status).With("approval", id).With("status", a.Status)
		}
		status := ApprovalDenied
		if grant {
			status = ApprovalGranted
		} else {
			mac = ""
		}
		if _, err := t.tx.ExecContext(ctx, "UPDATE approvals SET status = ?, reason = ?, decided_by = ?, decided_ns = ?, grant_mac = ? WHERE id = ?",
			status, reason, by, t.now, mac, id); err != nil {
			return err
		}
		t.audit("approval."+map[bool]string{true: "grant", false: "deny"}[grant], a.Request.Cwd, map[string]any{"id": id, "reason": reason, "by": by})
		if !grant {
			if err := t.discardHeld(a); err != nil {
				return err
			}
		}
		out, err = findApproval(ctx, t.tx, id, time.Unix(0, t.now))
		return err
	})
	return out, err
}

// UseApproval consumes a granted approval for a run whose digest is given,
// in one transaction, so an approval is used at most once. check, when not
// nil, verifies the grant (the approver MAC) before it is consumed.
func (v *Vault) UseApproval(ctx context.Context, id, digest, execID string, check func(Approval) error) (Approval, error) {
	var out Approval
	err := v.update(ctx, "use approval", func(t *txn) error {
		a, err := findApproval(ctx, t.tx, id, time.Unix(0, t.now))
		if err != nil {
			return err
		}
		reject := func(why string) error {
			return wire.Errorf(wire.CodeApprovalRejected, "approval %s cannot be used: %s", id, why).With("approval", id).With("status", a.Status)
		}
		switch a.Status {
		case ApprovalGranted:
		case ApprovalPending:
			return reject("it has not been granted yet")
		case ApprovalDenied:
			return reject("it was denied")
		case ApprovalUsed:
			return reject("it was already used (approvals are single-use)")
		case ApprovalExpired:
			return reject("it expired at " + a.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if a.Digest != digest {
			return reject("it was granted for another command, directory, vault or policy revision")
		}
		if check != nil {
			if err := check(a); err != nil {
				return err
			}
		}
		if _, err := t.tx.ExecContext(ctx, "UPDATE approvals SET status = ?, used_ns = ?, exec_id = ? WHERE id = ?", ApprovalUsed, t.now, execID, id); err != nil {
			return err
		}
		t.audit("approval.use", a.Request.Cwd, map[string]any{"id": id, "exec_id": execID})
		out, err = findApproval(ctx, t.tx, id, time.Unix(0, t.now))
		return err
	})
	return out, err
}
