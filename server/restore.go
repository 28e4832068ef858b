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
	wait, err := waitOf(in.WaitMS, "restore")
	if err != nil {
		writeError(w, 0, err)
		return
	}
	rn := s.state.Load().r
	res, err := rn.Restore(r.Context(), s.vaultOr(in.Vault), in.Checkpoint, wait)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// waitOf is how long a request waits for the vault's runs in flight:
// wait_ms, or runner.DefaultBusyWait when absent; op names the request in
// the error a negative one gets.
func waitOf(ms *int64, op string) (time.Duration, error) {
	if ms == nil {
		return runner.DefaultBusyWait, nil
	}
	if *ms < 0 {
		return 0, wire.Errorf(wire.CodeUsage, "%s: wait_ms must not be negative", op)
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// vaultOr is name, or the current vault when name is "".
func (s *Server) vaultOr(name string) string {
	if name == "" {
		return s.state.Load().r.Store.Current()
	}
	return name
}
