// Package server is `avfs serve`: a long-lived process that keeps the
// compiled policy warm and answers JSON over HTTP, modelled on OPA's REST
// API (docs/serve.md, docs/serve.openapi.json).
//
//	POST /v1/exec    a run, as `avfs --json proxy exec` (the same envelope, byte for byte)
//	POST /v1/precheck what a run would be decided, nothing run (the decision of `avfs hook …`)
//	POST /v1/decide  the policy's decision only, as `avfs --json policy eval`
//	POST /v1/hooks/HARNESS  a harness's hook payload answered as `avfs hook HARNESS --server` (always 200)
//	GET  /health     200 while a policy is loaded (?bundles: and it is the bundles' current content,
//	                 every managed bundle activated once; ?plugins: every OPA plugin OK)
//	GET  /v1/status  bundle revisions, uptime, runs in flight, the last reload error
//
// Runs go through runner.Runner.Exec: runs on different vaults run in
// parallel, runs on one vault take turns (waiting as long as the request's
// wait_ms, as proxy exec does). The policy is reloaded when the files it is
// made of change; a reload that fails keeps the last good one. With OPA's
// management plugins (Config.Managed), the policy is also swapped each time
// they activate a bundle (PolicyChanged).
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"avfs/engine"
	"avfs/runner"
	"avfs/sandbox"
	"avfs/wire"
)

// ExitStatusHeader is the HTTP header of a /v1/exec answer that carries the
// exit status `avfs proxy exec` would have exited with.
const ExitStatusHeader = "Avfs-Exit-Status"

// DefaultPoll is how often the policy's files are looked at for changes.
const DefaultPoll = time.Second

// DefaultGrace is how long a shutdown lets runs finish before they are
// interrupted.
const DefaultGrace = 10 * time.Second

// Loader builds the runner of the policy's current files: a Runner whose
// Policy is compiled (Exec then never loads one), and the files and
// directories whose change makes the server load again. It returns watch
// even when it fails, so that a fixed file is noticed.
type Loader func(ctx context.Context) (r *runner.Runner, watch []string, err error)

// Config is a server's configuration.
type Config struct {
	Load    Loader
	Poll    time.Duration // how often watched files are looked at (DefaultPoll when 0; negative: never)
	Grace   time.Duration // how long shutdown waits for runs (DefaultGrace when 0)
	Token   []byte        // when set, every request must carry "Authorization: Bearer TOKEN"
	Version string        // avfs's version, for /v1/status
	Log     *log.Logger   // reloads and shutdown (nil: discarded)
	Hooks   HookConfig    // POST /v1/hooks/HARNESS
	// BuildSandboxes builds every run's sandbox for it instead of
	// preparing the next one while no run is under way (see
	// sandbox.Pool).
	BuildSandboxes bool
	// Managed, when set, is the policy OPA's management plugins keep: the
	// policy of every runner the server uses is its Policy at the time
	// (whatever the Loader's runner had), and GET /health?bundles&plugins
	// asks it. Call PolicyChanged when its Policy changes.
	Managed Managed
}

// Managed is the policy OPA's management plugins keep, as the server uses
// it (manage.Manager). Its methods must be safe for concurrent use and
// must not call the server.
type Managed interface {
	// Policy is the policy to decide with now.
	Policy() *engine.Policy
	// NotActivated are the bundles never activated once (OPA's
	// /health?bundles), empty when all were.
	NotActivated() []string
	// PluginsNotOK are the plugins whose state is not OK, with their state
	// and message (OPA's /health?plugins), empty when all are.
	PluginsNotOK() map[string]string
}

// Server serves one policy to many clients. Its methods are safe for
// concurrent use.
type Server struct {
	cfg     Config
	started time.Time
	state   atomic.Pointer[state]
	listen  atomic.Value // string

	inFlight atomic.Int64
	total    atomic.Int64
	reloads  atomic.Int64

	mu        sync.Mutex
	reloadErr error
	reloadAt  time.Time
	watch     []string
	print     string // fingerprint of watch when last loaded

	kill     context.Context // cancelled when runs must stop
	killRuns context.CancelCauseFunc

	// vaults stay open across runs and reloads, until Serve returns.
	vaults *runner.VaultCache
	// sandboxes are prepared ahead of the runs, across reloads, until
	// Serve returns (nil: the run root could not be opened; each run
	// builds its own and reports why).
	sandboxes *sandbox.Pool
}

// state is one loaded policy with its runner.
type state struct {
	r        *runner.Runner
	loadedAt time.Time
}

// New loads the policy and returns the server. It fails as the loader
// does: a server never starts without a policy.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	s := &Server{cfg: cfg, started: time.Now(), vaults: runner.NewVaultCache(0, 0)}
	s.kill, s.killRuns = context.WithCancelCause(context.WithoutCancel(ctx))
	r, watch, err := cfg.Load(ctx)
	s.watch, s.print = watch, fingerprint(watch)
	if err != nil {
		return nil, err
	}
	if cfg.Managed != nil {
		r.Policy = cfg.Managed.Policy()
	}
	if r.Policy == nil {
		return nil, wire.Errorf(wire.CodeInternal, "serve: the loader gave no policy")
	}
	if !cfg.BuildSandboxes { // nothing is prepared before a sandboxed run asks
		if s.sandboxes, err = r.NewSandboxPool(); err != nil {
			cfg.Log.Printf("sandboxes are built for each run: %v", err)
		} else if off := s.sandboxes.Stats().Off; off != "" {
			cfg.Log.Printf("sandboxes are built for each run: %s", off)
		}
	}
	r.Vaults, r.Sandboxes = s.vaults, s.sandboxes
	s.state.Store(&state{r: r, loadedAt: time.Now()})
	s.listen.Store("")
	return s, nil
}

// Serve answers on ln until ctx ends, then shuts down: it stops accepting,
// lets runs in flight finish for the grace period, then interrupts them
// with ctx's cause (a runner.Interrupted: the runner signals their process
// trees and cleans up their mounts) and waits for them. It closes ln. It
// returns nil after a shutdown, or the listener's error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.listen.Store(addrOf(ln))
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	stopReload := make(chan struct{})
	reloadDone := make(chan struct{})
	go func() {
		defer close(reloadDone)
		s.reloadLoop(ctx, stopReload, s.cfg.Poll)
	}()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		s.cfg.Log.Printf("shutting down: %d run(s) in flight", s.inFlight.Load())
		grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Grace)
		if hs.Shutdown(grace) != nil {
			s.cfg.Log.Printf("interrupting %d run(s)", s.inFlight.Load())
			cause := context.Cause(ctx)
			if cause == nil || errors.Is(cause, context.Canceled) {
				cause = runner.Interrupted{Signal: 15}
			}
			s.killRuns(cause)
			_ = hs.Shutdown(context.WithoutCancel(ctx)) // the runs clean up, then answer
		}
		cancel()
		err = nil
	}
	close(stopReload)
	<-reloadDone
	s.killRuns(context.Canceled)
	s.vaults.Close()
	if s.sandboxes != nil {
		s.sandboxes.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func addrOf(ln net.Listener) string {
	a := ln.Addr()
	if a.Network() == "unix" {
		return "unix:" + a.String()
	}
	return "tcp:" + a.String()
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/exec", s.exec)
	mux.HandleFunc("POST /v1/precheck", s.precheck)
	mux.HandleFunc("POST /v1/decide", s.decide)
	mux.HandleFunc("POST /v1/restore", s.restore)
	mux.HandleFunc("POST /v1/approvals/settle", s.settle)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /v1/status", s.status)
	s.hookRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, wire.Errorf(wire.CodeNotFound, "serve: no endpoint %s %s", r.Method, r.URL.Path))
	})
	if len(s.cfg.Token) == 0 {
		return mux
	}
	want := sha256.Sum256(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		got := sha256.Sum256([]byte(tok))
		// Hashes of equal length: the comparison takes the same time whatever the token.
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !ok {
			if s.hookUnauthorized(w, r) { // a hook's "no" is a 200
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="avfs"`)
			writeError(w, http.StatusUnauthorized, wire.Errorf(wire.CodeInvalidInput, "serve: missing or wrong bearer token"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// maxBody bounds a request body.
const maxBody = 4 << 20

func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return wire.Errorf(wire.CodeUsage, "serve: the request body is not the JSON document wanted: %v", err)
	}
	return nil
}

// writeJSON writes v as `avfs --json` does: one indented document, HTML
// characters unescaped, a final newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = Encode(w, v)
}

// Encode writes v as `avfs --json` prints it.
func Encode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeError answers an error document; status 0 takes the code's.
func writeError(w http.ResponseWriter, status int, err error) {
	if status == 0 {
		status = wire.HTTPStatus(wire.CodeOf(err))
	}
	writeJSON(w, status, wire.ErrorDocument{Error: wire.ErrorObject(err)})
}

// exec is POST /v1/exec.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rn, req, ok := s.execRequest(w, r)
	if !ok {
		return
	}
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.kill, func() { cancel(context.Cause(s.kill)) })
	defer stop()
	var env *wire.Envelope
	var status int
	if s.kill.Err() != nil {
		env, status = runner.Failed(req, start, wire.Errorf(wire.CodeInternal, "proxy exec: avfs serve is shutting down"))
	} else {
		env, status = rn.Exec(ctx, req)
	}
	s.total.Add(1)
	w.Header().Set(ExitStatusHeader, strconv.Itoa(status))
	writeJSON(w, http.StatusOK, env)
}

// execRequest reads the ExecRequest of r and returns the runner of the
// current policy (a copy with the client's environment when it sent one)
// and the runner's request; on an error it answers w and ok is false.
func (s *Server) execRequest(w http.ResponseWriter, r *http.Request) (rn *runner.Runner, req runner.Request, ok bool) {
	var in wire.ExecRequest
	if err := readJSON(w, r, &in); err != nil {
		writeError(w, 0, err)
		return nil, req, false
	}
	rn = s.state.Load().r
	req, err := Request(in, rn)
	if err != nil {
		writeError(w, 0, err)
		return nil, req, false
	}
	if in.HostEnv != nil {
		c := *rn // the runner's fields are settings: a copy runs as it does
		c.HostEnv = in.HostEnv
		rn = &c
	}
	return rn, req, true
}

// Request is the runner's request for in, with proxy exec's defaults and
// checks: a usage error for what proxy exec's command line refuses.
func Request(in wire.ExecRequest, r *runner.Runner) (runner.Request, error) {
	switch {
	case in.Shell != "" && len(in.Argv) > 0:
		return runner.Request{}, wire.Errorf(wire.CodeUsage, "proxy exec: give a command after -- or --shell, not both")
	case in.Shell == "" && len(in.Argv) == 0:
		return runner.Request{}, wire.Errorf(wire.CodeUsage, "proxy exec: missing command (usage: avfs proxy exec [options] -- CMD [ARG…])")
	}
	dur := func(name string, ms *int64, def time.Duration) (time.Duration, error) {
		if ms == nil {
			return def, nil
		}
		if *ms < 0 {
			return 0, wire.Errorf(wire.CodeUsage, "proxy exec: %s must not be negative (got %d)", name, *ms)
		}
		return time.Duration(*ms) * time.Millisecond, nil
	}
	req := runner.Request{Vault: in.Vault, Argv: in.Argv, Shell: in.Shell, Cwd: in.Cwd, MaxOutput: in.MaxOutput,
		Env: in.Env, Mountpoint: in.Mountpoint, MountMode: in.MountMode, ApprovalID: in.ApprovalID,
		RollbackOnFailure: in.RollbackOnFailure, Explain: in.Explain, Readonly: in.Readonly,
		Sandbox: in.Sandbox, AllowWritableTrust: in.AllowWritableTrust, MaxChanges: runner.DefaultMaxChanges, Source: wire.SourceServe}
	var err error
	for _, d := range []struct {
		name string
		ms   *int64
		def  time.Duration
		to   *time.Duration
	}{{"timeout_ms", in.TimeoutMS, runner.DefaultTimeout, &req.Timeout}, {"kill_grace_ms", in.KillGraceMS, runner.DefaultKillGrace, &req.KillGrace},
		{"approval_ttl_ms", in.ApprovalTTLMS, runner.DefaultTTL, &req.ApprovalTTL}, {"wait_ms", in.WaitMS, runner.DefaultBusyWait, &req.BusyWait}} {
		if *d.to, err = dur(d.name, d.ms, d.def); err != nil {
			return req, err
		}
	}
	switch {
	case in.MaxOutput < 0:
		return req, wire.Errorf(wire.CodeUsage, "proxy exec: max_output must be a positive byte count")
	case in.MaxOutput == 0:
		req.MaxOutput = 1 << 20
	}
	if in.MaxChanges != nil {
		switch n := *in.MaxChanges; {
		case n < 0:
			return req, wire.Errorf(wire.CodeUsage, "proxy exec: max_changes must be 0 (all) or more")
		case n == 0:
			req.MaxChanges = -1
		default:
			req.MaxChanges = n
		}
	}
	if req.Argv == nil {
		req.Argv = []string{} // as proxy exec's command line has it for --shell (the approval digest tells them apart)
	}
	if req.Cwd == "" {
		req.Cwd = "/"
	}
	if req.MountMode == "" {
		req.MountMode = runner.ModeAuto
	}
	if req.Vault == "" {
		req.Vault = r.Store.Current()
	}
	return req, nil
}

// precheck is POST /v1/precheck: runner.Precheck of the run an ExecRequest
// asks for, with the warm policy. Errors are error documents.
func (s *Server) precheck(w http.ResponseWriter, r *http.Request) {
	rn, req, ok := s.execRequest(w, r)
	if !ok {
		return
	}
	pc, err := rn.Precheck(r.Context(), req)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	out := wire.PrecheckResult{Kind: wire.PrecheckKind, Decision: pc.Decision, Reasons: pc.Reasons, Bundles: pc.Bundles, Vault: pc.Vault, DecisionID: pc.DecisionID}
	if out.Reasons == nil {
		out.Reasons = []wire.Reason{}
	}
	if a := pc.Approval; a != nil {
		out.Approval = &wire.PrecheckApproval{ID: a.ID, Status: a.Status}
	}
	writeJSON(w, http.StatusOK, out)
}

// decide is POST /v1/decide: the decision of `avfs policy eval`.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	var in wire.DecideRequest
	if err := readJSON(w, r, &in); err != nil {
		writeError(w, 0, err)
		return
	}
	res, err := Decide(r.Context(), s.state.Load().r, in)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Decide parses and decides in as `avfs policy eval` does with r's policy,
// under a new decision id (the result's decision_id). It records nothing
// in a vault (a dry run), but r.DecisionLog, when set, is told the
// decision (source wire.SourceDecide) as it is told a run's; a log that
// fails leaves the answer as it is.
func Decide(ctx context.Context, r *runner.Runner, in wire.DecideRequest) (wire.DecideResult, error) {
	if (len(in.Argv) == 0) == (in.Shell == "") {
		return wire.DecideResult{}, wire.Errorf(wire.CodeUsage, "decide needs argv or shell (not both)")
	}
	switch in.Explain {
	case engine.ExplainOff, engine.ExplainNotes, engine.ExplainFails, engine.ExplainFull:
	default:
		return wire.DecideResult{}, wire.Errorf(wire.CodeUsage, "unknown explain mode %q (want notes, fails or full)", in.Explain)
	}
	mode := in.Sandbox
	if mode == "" {
		mode = wire.SandboxNamespaces
	}
	if !mode.Valid() {
		return wire.DecideResult{}, wire.Errorf(wire.CodeUsage, "unknown sandbox mode %q (want namespaces or none)", mode)
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/"
	}
	view := sandbox.Input(mode, "", sandbox.DefaultWorkspace, home)
	if mode == wire.SandboxNone {
		view = sandbox.Input(mode, "--sandbox none", "", home)
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = "/"
	}
	name := in.Vault
	if name == "" {
		name = r.Store.Current()
	}
	var ws engine.Workspace
	if v, release, err := r.Vaults.Open(ctx, r.Store, name, false); err == nil {
		defer release(true)
		ws = runner.Workspace(v)
	}
	p := r.Policy
	parsed, err := engine.Parse(ctx, engine.ParseRequest{Argv: in.Argv, Shell: in.Shell, Cwd: cwd, PathEnv: os.Getenv("PATH"),
		Request: wire.RequestInput{ApprovalID: in.ApprovalID}, Sandbox: view, Programs: p.Programs(), Workspace: ws})
	if err != nil {
		return wire.DecideResult{}, fmt.Errorf("parse command: %w", err)
	}
	res, err := p.Decide(ctx, parsed, engine.DecideOptions{Explain: in.Explain})
	if err != nil {
		return wire.DecideResult{}, err
	}
	out := wire.DecideResult{PolicyResult: res, DecisionID: runner.NewDecisionID()}
	if l := r.DecisionLog; l != nil {
		_ = l.LogDecision(ctx, out.DecisionID, wire.SourceDecide, parsed, res) // never changes the answer (see runner.DecisionLogger)
	}
	if in.Input {
		out.Input = parsed
	}
	return out, nil
}

// PolicyChanged makes Config.Managed's current policy the policy of the
// runs that start from now on (runs under way keep theirs). It does
// nothing without Config.Managed, or when the policy is the one in use.
// Safe for concurrent use.
func (s *Server) PolicyChanged() {
	if s.cfg.Managed == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	p := s.cfg.Managed.Policy()
	if p == nil || p == st.r.Policy {
		return
	}
	r := *st.r // the runner's fields are settings: a copy runs as it does
	r.Policy = p
	s.state.Store(&state{r: &r, loadedAt: time.Now()})
	if why := p.Unavailable(); why != "" {
		s.cfg.Log.Printf("policy unavailable, every run is denied: %s", why)
		return
	}
	s.cfg.Log.Printf("policy swapped: %s", bundleList(p.Bundles()))
}

// health is GET /health: 200 while a policy is loaded (always, once
// serving). With ?bundles, 503 while the last reload failed (the policy in
// use is not the bundles' current content), as OPA's bundle readiness.
// With Config.Managed, as OPA's own /health: ?bundles is 500 until every
// configured bundle was activated once, ?plugins 500 while a plugin is not
// OK; the body says which.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, bundles := q["bundles"]
	_, plugins := q["plugins"]
	if bundles {
		s.mu.Lock()
		err := s.reloadErr
		s.mu.Unlock()
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, wire.ServeHealth{Status: "stale", Error: err.Error()})
			return
		}
	}
	if m := s.cfg.Managed; m != nil && (bundles || plugins) {
		h := wire.ServeHealth{Status: "not_ready"}
		var why []string
		if bundles {
			if h.BundlesNotActivated = m.NotActivated(); len(h.BundlesNotActivated) > 0 {
				why = append(why, "one or more bundles are not activated: "+strings.Join(h.BundlesNotActivated, ", "))
			}
		}
		if plugins {
			if notOK := m.PluginsNotOK(); len(notOK) > 0 {
				h.PluginsNotOK = notOK
				names := slices.Sorted(maps.Keys(notOK))
				why = append(why, "one or more plugins are not up: "+strings.Join(names, ", "))
			}
		}
		if len(why) > 0 {
			h.Error = strings.Join(why, "; ")
			writeJSON(w, http.StatusInternalServerError, h)
			return
		}
	}
	writeJSON(w, http.StatusOK, wire.ServeHealth{Status: "ok"})
}

// status is GET /v1/status.
func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

// Status is the server's status document.
func (s *Server) Status() wire.ServeStatus {
	st := s.state.Load()
	out := wire.ServeStatus{Kind: wire.ServeStatusKind, Version: s.cfg.Version, PID: os.Getpid(), Listen: s.listen.Load().(string),
		StartedAt: s.started.UTC(), UptimeMS: time.Since(s.started).Milliseconds(), Bundles: st.r.Policy.Bundles(), LoadedAt: st.loadedAt.UTC(),
		RunsInFlight: int(s.inFlight.Load()), RunsTotal: s.total.Load(), Reloads: s.reloads.Load()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reloadErr != nil {
		out.LastReloadError = wire.NewErrorBody(s.reloadErr)
	}
	if !s.reloadAt.IsZero() {
		at := s.reloadAt.UTC()
		out.LastReloadAt = &at
	}
	if s.sandboxes != nil {
		ps := s.sandboxes.Stats()
		out.Sandboxes = &wire.ServeSandboxes{Taken: ps.Taken, Built: ps.Built, Prepared: ps.Prepared, Failed: ps.Failed, Waiting: ps.Waiting, Off: ps.Off}
	}
	return out
}

func bundleList(bs []wire.BundleInfo) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Name+"@"+b.Revision)
	}
	return strings.Join(parts, ", ")
}
