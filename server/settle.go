package server

import (
	"net/http"
	"time"

	"avfs/runner"
	"avfs/wire"
)

// settle is POST /v1/approvals/settle: runner.Settle of the approval a
// SettleRequest names, taking its turn with the vault's runs. Errors are
// error documents.
func (s *Server) settle(w http.ResponseWriter, r *http.Request) {
	var in wire.SettleRequest
	if err := readJSON(w, r, &in); err != nil {
		writeError(w, 0, err)
		return
	}
	if in.Approval == "" {
		writeError(w, 0, wire.Errorf(wire.CodeUsage, "settle: approval is required"))
		return
	}
	wait := runner.DefaultBusyWait
	if in.WaitMS != nil {
		if *in.WaitMS < 0 {
			writeError(w, 0, wire.Errorf(wire.CodeUsage, "settle: wait_ms must not be negative"))
			return
		}
		wait = time.Duration(*in.WaitMS) * time.Millisecond
	}
	rn := s.state.Load().r
	name := in.Vault
	if name == "" {
		name = rn.Store.Current()
	}
	applied, err := rn.Settle(r.Context(), name, in.Approval, wait)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.SettleResult{Applied: applied})
}
