package server

import (
	"net/http"
	"time"

	"avfs/runner"
	"avfs/wire"
)

// restore is POST /v1/restore: runner.Restore of the vault a
// RestoreRequest names, taking its turn with the vault's runs. Errors are
// error documents.
func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	var in wire.RestoreRequest
	if err := readJSON(w, r, &in); err != nil {
		writeError(w, 0, err)
		return
	}
	if in.Checkpoint == "" {
		writeError(w, 0, wire.Errorf(wire.CodeUsage, "restore: checkpoint is required"))
		return
	}
	wait := runner.DefaultBusyWait
	if in.WaitMS != nil {
		if *in.WaitMS < 0 {
			writeError(w, 0, wire.Errorf(wire.CodeUsage, "restore: wait_ms must not be negative"))
			return
		}
		wait = time.Duration(*in.WaitMS) * time.Millisecond
	}
	rn := s.state.Load().r
	name := in.Vault
	if name == "" {
		name = rn.Store.Current()
	}
	res, err := rn.Restore(r.Context(), name, in.Checkpoint, wait)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
