package vault

import (
	"context"

	"avfs/wire"
)

// Quota are a vault's limits; 0 means unlimited. They are enforced inside
// the transaction of every write, so every path (CLI, mount) obeys them.
type Quota = wire.VaultQuota

func quotaOf(st state) Quota {
	return Quota{MaxSizeMB: st.maxBytes >> 20, MaxFiles: st.maxFiles, MaxFileSizeMB: st.maxFileBytes >> 20}
}

// QuotaChange sets the quotas that are non-nil (0 clears one).
type QuotaChange struct {
	MaxSizeMB     *int64
	MaxFiles      *int64
	MaxFileSizeMB *int64
}

// SetQuota changes the vault's quotas. Lowering a quota below the current
// usage is allowed: later writes that grow the vault fail until it shrinks.
func (v *Vault) SetQuota(ctx context.Context, c QuotaChange) (Quota, error) {
	var q Quota
	for _, p := range []*int64{c.MaxSizeMB, c.MaxFiles, c.MaxFileSizeMB} {
		if p != nil && *p < 0 {
			return q, wire.Errorf(wire.CodeInvalidInput, "set quota: limits must be 0 (none) or positive")
		}
	}
	err := v.update(ctx, "set quota", func(t *txn) error {
		if c.MaxSizeMB != nil {
			t.st.maxBytes = *c.MaxSizeMB << 20
		}
		if c.MaxFiles != nil {
			t.st.maxFiles = *c.MaxFiles
		}
		if c.MaxFileSizeMB != nil {
			t.st.maxFileBytes = *c.MaxFileSizeMB << 20
		}
		q = quotaOf(t.st)
		t.audit("quota.set", "/", map[string]any{"max_size_mb": q.MaxSizeMB, "max_files": q.MaxFiles, "max_file_size_mb": q.MaxFileSizeMB})
		return nil
	})
	return q, err
}

// Usage is what the vault holds against its quotas.
type Usage struct {
	Quota Quota `json:"quota"`
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Usage returns the quotas and current usage.
func (v *Vault) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	err := v.view(ctx, "quota", func(_ querier, st state) error {
		u = Usage{Quota: quotaOf(st), Files: st.files, Bytes: st.bytes}
		return nil
	})
	return u, err
}
