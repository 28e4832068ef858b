package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"avfs/hooks"
	"avfs/runner"
	"avfs/wire"
)

// HookConfig is how POST /v1/hooks/HARNESS answers.
type HookConfig struct {
	// Exe is the avfs binary the rewritten commands run (an absolute path
	// on the harness's machine, which is the daemon's). "" blocks every
	// hook: a rewrite needs it.
	Exe string
	// Server is the --server the rewritten commands name; "" is the
	// address the server listens on (the socket's path, or tcp:HOST:PORT
	// with the loopback address for a wildcard host).
	Server string
	// Workspace finds the workspace (avfs workspace up) a payload's
	// directory is in; nil for none (see hooks.Options.Workspace).
	Workspace func(dir string) (*hooks.Workspace, error)
	// Forward decides a command of a workspace through the avfs that
	// serves it (its view shows the vault at the project directory); with
	// none, such a command is blocked.
	Forward func(ctx context.Context, c hooks.Command) (hooks.Verdict, error)
}

// hookPrefix is the path of the hook endpoints, one per harness.
const hookPrefix = "/v1/hooks/"

// hookRoutes adds POST /v1/hooks/HARNESS for every harness.
func (s *Server) hookRoutes(mux *http.ServeMux) {
	for _, h := range hooks.Harnesses {
		mux.HandleFunc("POST "+hookPrefix+string(h), func(w http.ResponseWriter, r *http.Request) { s.hook(w, r, h) })
	}
}

// hookOf is the harness of a hook endpoint's request, if it is one.
func hookOf(r *http.Request) (hooks.Harness, bool) {
	name, ok := strings.CutPrefix(r.URL.Path, hookPrefix)
	if !ok || r.Method != http.MethodPost {
		return "", false
	}
	for _, h := range hooks.Harnesses {
		if string(h) == name {
			return h, true
		}
	}
	return "", false
}

// hookUnauthorized answers a hook request that lacks the bearer token
// with its harness's blocking answer (status 200, since the harnesses
// read any other status as "go on"), and reports whether r was one.
func (s *Server) hookUnauthorized(w http.ResponseWriter, r *http.Request) bool {
	h, ok := hookOf(r)
	if !ok {
		return false
	}
	writeHook(w, hooks.BlockHTTP(h, r.Body, "avfs serve: missing or wrong bearer token; the command is blocked"))
	return true
}

// hook is POST /v1/hooks/HARNESS: the body is the harness's hook payload,
// answered as `avfs hook HARNESS --server ADDR` answers it (hooks.RunHTTP),
// decided with the warm policy (runner.Precheck, as POST /v1/precheck).
// The answer is always status 200 with the harness's document: a hook
// that cannot be answered (an unknown query parameter, a broken policy, a
// payload that is not the harness's) is its blocking answer, never an
// error status the harness would take for "run it".
//
// Query parameters, all optional: vault (the vault's name; the current
// one when absent), project (the host directory that is the vault's
// root, as --project), timeout (a Go duration, as --timeout) and, for
// claude-code, headless (1 or true: defer instead of ask).
func (s *Server) hook(w http.ResponseWriter, r *http.Request, h hooks.Harness) {
	o, vault, err := s.hookOptions(r, h)
	if err != nil {
		writeHook(w, hooks.BlockHTTP(h, r.Body, fmt.Sprintf("avfs serve: %v; the command is blocked", err)))
		return
	}
	d := precheckDecider{rn: s.state.Load().r, vault: vault, forward: s.cfg.Hooks.Forward}
	writeHook(w, hooks.RunHTTP(r.Context(), h, d, o, r.Body))
}

// writeHook answers a hook with status 200: body is the harness's JSON,
// or empty for no opinion.
func writeHook(w http.ResponseWriter, body []byte) {
	if len(body) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// hookOptions reads a hook request's query.
func (s *Server) hookOptions(r *http.Request, h hooks.Harness) (o hooks.Options, vault string, err error) {
	if s.cfg.Hooks.Exe == "" {
		return o, "", fmt.Errorf("no avfs binary for the rewritten commands")
	}
	o = hooks.Options{Exe: s.cfg.Hooks.Exe, Server: s.hookServer(), Workspace: s.cfg.Hooks.Workspace}
	for k, vs := range r.URL.Query() {
		if len(vs) != 1 {
			return o, "", fmt.Errorf("query parameter %s given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "vault":
			vault = v
		case "project":
			o.Project = v
		case "timeout":
			if o.Timeout, err = time.ParseDuration(v); err != nil || o.Timeout <= 0 {
				return o, "", fmt.Errorf("query parameter timeout=%q is not a positive duration", v)
			}
		case "headless":
			if h != hooks.ClaudeCode {
				return o, "", fmt.Errorf("query parameter headless is for claude-code only")
			}
			switch v {
			case "1", "true":
				o.Headless = true
			case "0", "false":
			default:
				return o, "", fmt.Errorf("query parameter headless=%q is not 1, true, 0 or false", v)
			}
		default:
			return o, "", fmt.Errorf("unknown query parameter %q (want vault, project, timeout or headless)", k)
		}
	}
	return o, vault, nil
}

// hookServer is the --server the rewritten commands name.
func (s *Server) hookServer() string {
	if s.cfg.Hooks.Server != "" {
		return s.cfg.Hooks.Server
	}
	addr := s.listen.Load().(string)
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return path
	}
	a, ok := strings.CutPrefix(addr, "tcp:")
	if !ok {
		return ""
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // Go's wildcard listener takes IPv4 too
	}
	return "tcp:" + net.JoinHostPort(host, port)
}

// precheckDecider decides a hook's command as POST /v1/precheck does the
// request `avfs hook` sends it: the run of the rewritten `proxy exec
// --shell` (argv the empty list, proxy exec's timeout and approval TTL),
// in vault ("" for the current one), with the daemon's environment.
type precheckDecider struct {
	rn      *runner.Runner
	vault   string
	forward func(ctx context.Context, c hooks.Command) (hooks.Verdict, error)
}

func (d precheckDecider) Decide(ctx context.Context, c hooks.Command) (hooks.Verdict, error) {
	if c.Vault != "" && c.Server != "" {
		if d.forward == nil {
			return hooks.Verdict{}, fmt.Errorf("vault %s is a workspace served by its own avfs, which this daemon cannot ask", c.Vault)
		}
		return d.forward(ctx, c)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = runner.DefaultTimeout
	}
	ms := func(d time.Duration) *int64 { n := d.Milliseconds(); return &n }
	req, err := Request(wire.ExecRequest{Argv: []string{}, Shell: c.Script, Cwd: c.Cwd, Vault: d.vault,
		TimeoutMS: ms(timeout), ApprovalTTLMS: ms(runner.DefaultTTL)}, d.rn)
	if err != nil {
		return hooks.Verdict{}, err
	}
	req.Source = wire.SourceHook
	pc, err := d.rn.Precheck(ctx, req)
	if err != nil {
		return hooks.Verdict{}, err
	}
	v := hooks.Verdict{Decision: pc.Decision, Reasons: pc.Reasons, Vault: pc.Vault}
	if a := pc.Approval; a != nil {
		v.Approval = &hooks.Approval{ID: a.ID, Status: a.Status}
	}
	return v, nil
}
