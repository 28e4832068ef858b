// Package manage runs OPA's management plugins for avfs: a plugins.Manager
// built from OPA's own configuration file (services, bundles, discovery,
// status, decision_logs, keys, labels, persistence_directory), with the
// plugins registered as OPA's runtime registers them (discovery.New makes
// the bundle, status and decision-log plugins of the configuration). The
// bundles the bundle plugin activates are compiled, with avfs's local
// bundles (the embedded default and --bundle ones), into the
// engine.Policy avfs decides with, each time one activates; until every
// configured bundle has been activated once, the policy denies every run
// (engine.ReasonPolicyUnavailable). Downloading, ETags, long polling,
// signature verification and persistence are OPA's plugins' own.
package manage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	bundleplugin "github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/discovery"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"avfs/bundles"
	"avfs/engine"
	"avfs/wire"
)

// PluginName is the name under which a Manager reports the state of the
// policy it compiles among OPA's plugins (to the status service, and
// GET /health?plugins): OK once a policy was compiled from every
// configured bundle, NOT_READY before, ERROR while the last activated
// state could not be compiled, WARN while the last download or
// activation of a bundle failed (in both, the previous policy is kept).
const PluginName = "avfs_policy"

// Options are what a Manager compiles the activated bundles with.
type Options struct {
	// Local are the bundles compiled with the activated ones, first (the
	// embedded default bundle, --bundle ones …); nil is none. Their roots
	// and the activated bundles' must not overlap.
	Local *bundles.Set
	// Policy are the options of engine.NewPolicy.
	Policy engine.PolicyOptions
	// ID is the instance id OPA reports (labels.id); "" is a random one.
	ID string
	// Logger receives OPA's plugins' logs and the Manager's; nil discards.
	Logger logging.Logger
	// OnChange, when set, is called each time Policy changes, from the
	// Manager's goroutine and never with a lock of the Manager held: it
	// may call Policy. It must not block for long.
	OnChange func()
}

// Manager runs OPA's plugins and keeps the policy of what they activated.
// Its methods are safe for concurrent use.
type Manager struct {
	opa      *plugins.Manager
	cfg      *Config
	log      logging.Logger
	onChange func()

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once

	mu       sync.Mutex
	local    *bundles.Set
	popts    engine.PolicyOptions
	policy   *engine.Policy
	set      *bundles.Set
	built    string // what the policy was compiled from (fingerprint), "" for nothing
	settled  bool   // every configured bundle has been activated once
	changed  chan struct{}
	localGen int

	// The state reported as PluginName (stateLocked).
	waiting    string            // why the policy is unavailable, "" when not waiting
	compileErr error             // of the last compile
	bundleErrs map[string]string // bundle name -> why its last download or activation failed
	reported   *plugins.Status   // the state last reported
	listened   *bundleplugin.Plugin
}

// New builds OPA's plugin manager from cfg (LoadConfig) and the plugins
// the configuration asks for, as OPA's runtime does, without starting
// them. A configuration OPA refuses (a service, key, bundle, status or
// decision_logs section it cannot read) is invalid_input naming the file.
// Until Start, Policy denies every run (unless no bundle is configured).
// New reads nothing from the network.
func New(ctx context.Context, cfg *Config, opts Options) (*Manager, error) {
	logger := opts.Logger
	if logger == nil {
		logger = logging.NewNoOpLogger()
	}
	id := opts.ID
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	bad := func(err error) error {
		return wire.Errorf(wire.CodeInvalidInput, "OPA configuration %s: %v", cfg.Path, err).With("path", cfg.Path)
	}
	opa, err := plugins.New(cfg.Raw, id, inmem.New(), plugins.Logger(logger), plugins.ConsoleLogger(logger))
	if err != nil {
		return nil, bad(err)
	}
	if err := opa.Init(ctx); err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "OPA configuration %s: initialise the plugins: %w", cfg.Path, err).With("path", cfg.Path)
	}
	var boot map[string]any
	if err := util.Unmarshal(cfg.Raw, &boot); err != nil {
		return nil, bad(err)
	}
	disco, err := discovery.New(opa, discovery.Factories(map[string]plugins.Factory{}), discovery.Metrics(metrics.New()), discovery.BootConfig(boot))
	if err != nil {
		return nil, bad(err)
	}
	opa.Register(discovery.Name, disco)
	opa.Register(PluginName, statePlugin{})
	m := &Manager{opa: opa, cfg: cfg, log: logger.WithFields(map[string]any{"plugin": PluginName}), onChange: opts.OnChange,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		local: opts.Local, popts: opts.Policy, changed: make(chan struct{})}
	if m.local == nil {
		m.local = &bundles.Set{}
	}
	m.policy = engine.NewUnavailablePolicy(fmt.Sprintf("the bundles of %s have not been activated yet (OPA's plugins have not started)", cfg.Path), m.local.Infos())
	m.set = m.local
	return m, nil
}

// OPA is OPA's plugin manager the Manager runs, for plugins that act on
// it (such as the decision-log plugin, logs.Lookup). Its store holds the
// activated bundles; writing to it changes the policy.
func (m *Manager) OPA() *plugins.Manager { return m.opa }

// Config is the configuration the Manager was built from.
func (m *Manager) Config() *Config { return m.cfg }

// Start starts OPA's plugins: bundles persisted on an earlier run are
// activated before it returns (so Policy is already theirs), downloads go
// on in the background until Stop, and the policy is compiled again each
// time a bundle activates. A plugin that cannot start (the persistence
// directory cannot be made …) is an internal error; the Manager must then
// still be stopped. Start runs once; calling it again does nothing.
func (m *Manager) Start(ctx context.Context) error {
	var err error
	m.startOnce.Do(func() {
		m.opa.RegisterCompilerTrigger(func(storage.Transaction) {
			// Called while the activation commits: only signal.
			select {
			case m.kick <- struct{}{}:
			default:
			}
		})
		if err = m.opa.Start(ctx); err != nil {
			err = wire.Errorf(wire.CodeInternal, "start OPA's plugins (%s): %w", m.cfg.Path, err).With("path", m.cfg.Path)
			close(m.done)
			return
		}
		m.rebuild(ctx)
		go m.loop(context.WithoutCancel(ctx))
	})
	return err
}

// loop compiles the policy again after each activation, until Stop.
func (m *Manager) loop(ctx context.Context) {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case <-m.kick:
			m.rebuild(ctx)
		}
	}
}

// Stop stops OPA's plugins (the status and decision-log plugins flush
// what they hold within ctx) and the recompiling; Policy keeps its last
// value. It is safe to call more than once, and without Start.
func (m *Manager) Stop(ctx context.Context) {
	m.stopOnce.Do(func() {
		close(m.stop)
		select {
		case <-m.done:
		default:
			m.startOnce.Do(func() { close(m.done) }) // never started
			<-m.done
		}
		m.opa.Stop(ctx)
	})
}

// Policy is the policy to decide with now: the local bundles and the
// activated ones compiled together, or, while a configured bundle has not
// been activated once (or while no compiled state exists), a policy
// made with engine.NewUnavailablePolicy that denies every run saying
// which. A compile that fails keeps the policy it would have replaced.
func (m *Manager) Policy() *engine.Policy {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy
}

// Current is Policy with the set of bundles it was compiled from.
func (m *Manager) Current() (*engine.Policy, *bundles.Set) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy, m.set
}

// Wait waits until every configured bundle has been activated once (a
// persisted one counts at Start) or ctx ends, and returns Policy then:
// when ctx ended first, it denies every run. It never fails.
func (m *Manager) Wait(ctx context.Context) *engine.Policy {
	for {
		m.mu.Lock()
		settled, p, ch := m.settled, m.policy, m.changed
		m.mu.Unlock()
		if settled {
			return p
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return m.Policy()
		}
	}
}

// SetLocal replaces the local bundles and the compile options and
// compiles the policy again at once: the new policy, or the error of
// engine.NewPolicy (or of overlapping roots), and then the policy in use
// stays. While a configured bundle has not been activated, the policy
// returned denies every run, and err is nil.
func (m *Manager) SetLocal(ctx context.Context, local *bundles.Set, opts engine.PolicyOptions) (*engine.Policy, error) {
	if local == nil {
		local = &bundles.Set{}
	}
	m.mu.Lock()
	m.local, m.popts = local, opts
	m.localGen++
	m.mu.Unlock()
	return m.rebuild(ctx)
}

// rebuild compiles the policy of the store's activated bundles if they
// changed since the last compile, reports the Manager's state to OPA's
// plugin status (PluginName) when it changed, and returns the policy in
// use and the compile's error.
func (m *Manager) rebuild(ctx context.Context) (*engine.Policy, error) {
	names, verified, waiting := m.configured()
	m.listen()
	m.mu.Lock()
	p, err, changed := m.rebuildLocked(ctx, names, verified, waiting)
	state := m.stateLocked()
	report := m.reported == nil || *m.reported != state
	if report {
		m.reported = &state
	}
	m.mu.Unlock()
	if report {
		m.opa.UpdatePluginStatus(PluginName, &state)
	}
	if changed && m.onChange != nil {
		m.onChange()
	}
	return p, err
}

// listen registers the Manager for the bundle plugin's status updates
// (errors of bundles OPA refused), once for each bundle plugin (discovery
// may replace it). Never called with the plugin's lock held.
func (m *Manager) listen() {
	bp := bundleplugin.Lookup(m.opa)
	m.mu.Lock()
	known := bp == nil || bp == m.listened
	m.listened = bp
	m.mu.Unlock()
	if !known {
		bp.RegisterBulkListener(PluginName, m.bundleStatus)
	}
}

// bundleStatus records which bundles the last download or activation
// failed for, and has the state reported. The bundle plugin calls it with
// its lock held: it only records and signals.
func (m *Manager) bundleStatus(statuses map[string]*bundleplugin.Status) {
	errs := map[string]string{}
	for name, st := range statuses {
		if st == nil || (st.Code == "" && len(st.Errors) == 0) {
			continue
		}
		msg := st.Message
		for _, e := range st.Errors {
			msg += "; " + e.Error()
		}
		errs[name] = strings.TrimPrefix(msg, "; ")
	}
	m.mu.Lock()
	m.bundleErrs = errs
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// stateLocked is the Manager's plugin status: NOT_READY while it waits for
// bundles, ERROR while the activated bundles cannot be compiled, WARN while
// the last download or activation of a bundle failed (OPA kept the
// previous one), OK otherwise.
func (m *Manager) stateLocked() plugins.Status {
	switch {
	case m.waiting != "":
		return plugins.Status{State: plugins.StateNotReady, Message: m.waiting}
	case m.compileErr != nil:
		return plugins.Status{State: plugins.StateErr, Message: "the activated bundles could not be compiled, the policy in use stays: " + m.compileErr.Error()}
	case len(m.bundleErrs) > 0:
		var parts []string
		for _, name := range util.KeysSorted(m.bundleErrs) {
			parts = append(parts, "bundle "+name+": "+m.bundleErrs[name])
		}
		return plugins.Status{State: plugins.StateWarn, Message: strings.Join(parts, "; ") + " (the policy in use stays)"}
	}
	return plugins.Status{State: plugins.StateOK}
}

// configured are the names of the bundles the bundle plugin is
// configured with, sorted, those whose signature OPA's plugin requires
// and verifies, and what is waited for before they are known ("":
// nothing; the discovery bundle while it has not been activated). Never
// called with m.mu held: the plugin's configuration lock is taken.
func (m *Manager) configured() (names []string, verified map[string]bool, waiting string) {
	if m.cfg.Discovery {
		if s := m.opa.PluginStatus()[discovery.Name]; s == nil || s.State != plugins.StateOK {
			return nil, nil, "the discovery bundle has not been activated yet"
		}
	}
	verified = map[string]bool{}
	if bp := bundleplugin.Lookup(m.opa); bp != nil {
		srcs := bp.Config().Bundles
		names = util.KeysSorted(srcs)
		for name, src := range srcs {
			verified[name] = src != nil && src.Signing.SignatureRequired()
		}
	}
	return names, verified, ""
}

// rebuildLocked is rebuild with m.mu held; changed says whether Policy
// changed.
func (m *Manager) rebuildLocked(ctx context.Context, names []string, verified map[string]bool, waiting string) (_ *engine.Policy, _ error, changed bool) {
	fp, missing, err := m.activated(ctx, names)
	if err != nil {
		m.log.Error("Reading the activated bundles failed: %v", err)
		m.compileErr = err
		return m.policy, err, false
	}
	if waiting == "" && len(missing) > 0 {
		waiting = fmt.Sprintf("the bundle(s) %s configured in %s have not been activated yet", strings.Join(missing, ", "), m.cfg.Path)
	}
	m.waiting = waiting
	if waiting != "" {
		m.built, m.settled, m.compileErr = "", false, nil
		if m.policy.Unavailable() == waiting {
			return m.policy, nil, false
		}
		m.setPolicy(engine.NewUnavailablePolicy(waiting, m.local.Infos()), m.local)
		return m.policy, nil, true
	}
	m.settled = true
	fp = fmt.Sprintf("%d\x00%s", m.localGen, fp)
	if fp == m.built {
		return m.policy, m.compileErr, false
	}
	m.built = fp
	p, set, err := m.compile(ctx, names, verified)
	m.compileErr = err
	if err != nil {
		m.log.Error("The activated bundles cannot be compiled into avfs's policy; the policy in use stays: %v", err)
		if m.policy.Unavailable() != "" {
			m.setPolicy(engine.NewUnavailablePolicy("the activated bundles could not be compiled: "+err.Error(), m.local.Infos()), m.local)
			return m.policy, err, true
		}
		close(m.changed) // Wait returns: the bundles have settled
		m.changed = make(chan struct{})
		return m.policy, err, false
	}
	m.setPolicy(p, set)
	m.log.Info("Policy compiled from bundles %s.", bundleList(p.Bundles()))
	return p, nil, true
}

// setPolicy makes p the policy and wakes Wait.
func (m *Manager) setPolicy(p *engine.Policy, set *bundles.Set) {
	m.policy, m.set = p, set
	close(m.changed)
	m.changed = make(chan struct{})
}

// activated reads which of names the store holds activated (missing are
// the others) and a fingerprint of their revisions and ETags.
func (m *Manager) activated(ctx context.Context, names []string) (fp string, missing []string, err error) {
	var b strings.Builder
	err = storage.Txn(ctx, m.opa.Store, storage.TransactionParams{}, func(txn storage.Transaction) error {
		have, err := opabundle.ReadBundleNamesFromStore(ctx, m.opa.Store, txn)
		if err != nil && !storage.IsNotFound(err) {
			return err
		}
		for _, name := range names {
			if !slices.Contains(have, name) {
				missing = append(missing, name)
				continue
			}
			rev, _ := opabundle.ReadBundleRevisionFromStore(ctx, m.opa.Store, txn, name)
			etag, _ := opabundle.ReadBundleEtagFromStore(ctx, m.opa.Store, txn, name)
			fmt.Fprintf(&b, "%s\x00%s\x00%s\x00", name, rev, etag)
		}
		return nil
	})
	return b.String(), missing, err
}

// compile compiles the local bundles with the activated ones called names
// (those of verified were signed and verified by OPA's plugin).
func (m *Manager) compile(ctx context.Context, names []string, verified map[string]bool) (*engine.Policy, *bundles.Set, error) {
	remote, err := bundles.FromStore(ctx, m.opa.Store, names)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range remote {
		b.Signed, b.Verified = verified[b.Name], verified[b.Name]
	}
	set := &bundles.Set{Bundles: append(slices.Clone(m.local.Bundles), remote...)}
	if err := set.CheckRoots(); err != nil {
		return nil, nil, err
	}
	p, err := engine.NewPolicy(ctx, set, m.popts)
	if err != nil {
		return nil, nil, err
	}
	return p, set, nil
}

// NotActivated says what keeps GET /health?bundles from being 200, as
// OPA's own /health?bundles: the discovery bundle while it has not been
// activated, the configured bundles never activated (or in error before
// the first time all were), and PluginName while the policy denies every
// run for want of them. Empty when all were activated once.
func (m *Manager) NotActivated() []string {
	st := m.opa.PluginStatus()
	var out []string
	if s, ok := st[discovery.Name]; ok && s != nil && s.State != plugins.StateOK && m.cfg.Discovery {
		out = append(out, discovery.Name)
	}
	if s, ok := st[bundleplugin.Name]; ok && s != nil && s.State != plugins.StateOK {
		var names []string
		if bp := bundleplugin.Lookup(m.opa); bp != nil {
			names = bp.NotActivated()
		}
		if len(names) == 0 {
			names = []string{bundleplugin.Name}
		}
		out = append(out, names...)
	}
	if m.Policy().Unavailable() != "" && len(out) == 0 {
		out = append(out, PluginName)
	}
	return out
}

// PluginsNotOK says what keeps GET /health?plugins from being 200, as
// OPA's own: each plugin whose state is not OK, with its state and
// message. Empty when all are OK.
func (m *Manager) PluginsNotOK() map[string]string {
	out := map[string]string{}
	for name, s := range m.opa.PluginStatus() {
		if s == nil || s.State == plugins.StateOK {
			continue
		}
		out[name] = string(s.State)
		if s.Message != "" {
			out[name] += ": " + s.Message
		}
	}
	return out
}

// statePlugin stands for the Manager among OPA's plugins: its status is
// the policy's (PluginName).
type statePlugin struct{}

func (statePlugin) Start(context.Context) error      { return nil }
func (statePlugin) Stop(context.Context)             {}
func (statePlugin) Reconfigure(context.Context, any) {}

func bundleList(bs []wire.BundleInfo) string {
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		if b.Revision != "" {
			parts = append(parts, b.Name+"@"+b.Revision)
		} else {
			parts = append(parts, b.Name)
		}
	}
	return strings.Join(parts, ", ")
}
