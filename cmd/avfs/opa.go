package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/urfave/cli/v2"

	"avfs/bundles"
	"avfs/engine"
	"avfs/manage"
	"avfs/server"
	"avfs/wire"
)

// defaultOPAWait is how long a one-shot command waits for the bundles of
// OPA's configuration to activate when policy.opa_wait does not say.
const defaultOPAWait = 10 * time.Second

// opaStopGrace bounds how long stopping OPA's plugins may take at the end
// of a command (the status and decision-log plugins flush).
const opaStopGrace = 5 * time.Second

// opaPersistDir is the default persistence directory of OPA's plugins:
// under $AVFS_HOME, never the working directory (OPA's default), which the
// agent's command may write.
func opaPersistDir(home string) string { return filepath.Join(home, "opa") }

// opaConfigPath is OPA's configuration file of the command: --config-file,
// else the config's policy.opa_config; "" for none.
func opaConfigPath(c *cli.Context, cfg config) string {
	if p := c.String("config-file"); p != "" {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return cfg.Policy.OPAConfig
}

// loadOPAConfig reads OPA's configuration at path; nil when path is "".
func (e *env) loadOPAConfig(path string) (*manage.Config, error) {
	if path == "" {
		return nil, nil
	}
	return manage.LoadConfig(path, opaPersistDir(e.home))
}

// policyOf compiles a command's policy: the bundles of opts and, with
// OPA's configuration at opaPath, the bundles OPA's plugins activate,
// waited for as the config says (policy.opa_wait); when they did not
// activate in time, the policy denies every run saying why. The set is
// what the policy was compiled from.
func (e *env) policyOf(ctx context.Context, opts bundles.Options, opaPath string, cfg config) (*engine.Policy, *bundles.Set, error) {
	if opaPath == "" {
		return compilePolicy(ctx, opts, cfg.Policy.engineOptions())
	}
	set, err := bundles.Load(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	m, err := e.oneShotManager(ctx, opaPath, set, cfg.Policy.engineOptions())
	if err != nil {
		return nil, nil, err
	}
	wait, cancel := context.WithTimeout(ctx, cfg.Policy.opaWait)
	defer cancel()
	m.Wait(wait)
	p, set := m.Current()
	return p, set, nil
}

// oneShotManager is the Manager of a command that is not a server: made
// and started on the first call (bundles persisted earlier activate at
// once), the same one afterwards with its local bundles replaced, and
// stopped when the command ends (stopManagers). Its logs are dropped: a
// run denied for want of a bundle says why in its reasons.
func (e *env) oneShotManager(ctx context.Context, opaPath string, local *bundles.Set, popts engine.PolicyOptions) (*manage.Manager, error) {
	e.managerMu.Lock()
	defer e.managerMu.Unlock()
	if m := e.manager; m != nil && m.Config().Path == opaPath {
		if _, err := m.SetLocal(ctx, local, popts); err != nil && m.Policy().Unavailable() == "" {
			return nil, err
		}
		return m, nil
	}
	ocfg, err := e.loadOPAConfig(opaPath)
	if err != nil {
		return nil, err
	}
	m, err := manage.New(ctx, ocfg, manage.Options{Local: local, Policy: popts})
	if err != nil {
		return nil, err
	}
	e.managers = append(e.managers, m)
	if err := m.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	e.manager = m
	return m, nil
}

// decisionLog sends a command's decisions (Runner.DecisionLog) to the
// decision-log plugin of the Manager of OPA's plugins that keeps its
// policy: the one-shot command's, or the server's. Without OPA's
// configuration, or without decision_logs in it, it logs nothing. A
// one-shot command's buffered events are uploaded when its Managers stop
// (stopManagers, within opaStopGrace); a server uploads as it goes.
type decisionLog struct{ e *env }

func (l decisionLog) LogDecision(ctx context.Context, id string, source wire.DecisionSource, input *wire.Input, result wire.PolicyResult) error {
	m := l.e.decisionManager()
	if m == nil {
		return nil
	}
	dl := manage.NewDecisionLog(m.OPA())
	if dl == nil {
		return nil
	}
	return dl.LogDecision(ctx, id, source, input, result)
}

// decisionManager is the Manager whose policy decides the command's runs:
// a one-shot command's, else the last one started (a server's); nil
// without OPA's configuration.
func (e *env) decisionManager() *manage.Manager {
	e.managerMu.Lock()
	defer e.managerMu.Unlock()
	if e.manager != nil {
		return e.manager
	}
	if n := len(e.managers); n > 0 {
		return e.managers[n-1]
	}
	return nil
}

// stopManagers stops the Managers the command started.
func (e *env) stopManagers() {
	e.managerMu.Lock()
	ms := e.managers
	e.managers, e.manager = nil, nil
	e.managerMu.Unlock()
	for _, m := range ms {
		ctx, cancel := context.WithTimeout(context.Background(), opaStopGrace)
		m.Stop(ctx)
		cancel()
	}
}

// servePolicy is the policy OPA's plugins keep for a server (avfs serve,
// workspace serve): the Manager, started with the server's local bundles,
// whose changes reach the server once it is attached.
type servePolicy struct {
	m    *manage.Manager
	srv  atomic.Pointer[server.Server]
	path string
	sum  [32]byte // of the configuration file when it started
}

// startServePolicy starts OPA's plugins for a server when the command has
// OPA's configuration (nil, nil when not). Their logs go to stderr.
func (e *env) startServePolicy(c *cli.Context) (*servePolicy, error) {
	cfg, err := loadConfig(e.home)
	if err != nil {
		return nil, err
	}
	path := opaConfigPath(c, cfg)
	if path == "" {
		return nil, nil
	}
	ocfg, err := e.loadOPAConfig(path)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInvalidInput, "read OPA configuration %s: %w", path, err).With("path", path)
	}
	set, err := bundles.Load(c.Context, e.bundleOptionsOf(c, cfg))
	if err != nil {
		return nil, err
	}
	logger := logging.New()
	logger.SetOutput(e.stderr)
	logger.SetLevel(logging.Info)
	sp := &servePolicy{path: path, sum: sha256.Sum256(raw)}
	sp.m, err = manage.New(c.Context, ocfg, manage.Options{Local: set, Policy: cfg.Policy.engineOptions(), Logger: logger, OnChange: func() {
		if srv := sp.srv.Load(); srv != nil {
			srv.PolicyChanged()
		}
	}})
	if err != nil {
		return nil, err
	}
	e.managerMu.Lock()
	e.managers = append(e.managers, sp.m)
	e.managerMu.Unlock()
	if err := sp.m.Start(context.WithoutCancel(c.Context)); err != nil {
		return nil, err
	}
	return sp, nil
}

// attach passes the Manager's changes to srv from now on, and the one
// that came before.
func (sp *servePolicy) attach(srv *server.Server) {
	sp.srv.Store(srv)
	srv.PolicyChanged()
}

// managed is the server's Config.Managed: nil without OPA's configuration.
func (sp *servePolicy) managed() server.Managed {
	if sp == nil {
		return nil
	}
	return sp.m
}

// policy compiles the server's local bundles with the activated ones
// (manage.Manager.SetLocal). OPA's configuration file is read at start
// only: a change to it is an error until the server is restarted.
func (sp *servePolicy) policy(ctx context.Context, set *bundles.Set, popts engine.PolicyOptions) (*engine.Policy, error) {
	raw, err := os.ReadFile(sp.path)
	if err != nil || !bytes.Equal(sumOf(raw), sp.sum[:]) {
		return nil, wire.Errorf(wire.CodeInvalidInput, "OPA configuration %s changed (or cannot be read): restart to apply it; the policy in use stays", sp.path).
			With("path", sp.path)
	}
	return sp.m.SetLocal(ctx, set, popts)
}

func sumOf(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
