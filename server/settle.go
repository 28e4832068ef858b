package server

import (
	"net/http"

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
	wait, err := waitOf(in.WaitMS, "settle")
	if err != nil {
		writeError(w, 0, err)
		return
	}
	applied, err := s.state.Load().r.Settle(r.Context(), s.vaultOr(in.Vault), in.Approval, wait)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.SettleResult{Applied: applied})
}
