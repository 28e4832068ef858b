package manage_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"avfs/bundles"
	"avfs/engine"
	"avfs/manage"
	"avfs/runner"
	"avfs/server"
	"avfs/vault"
	"avfs/wire"
)

var _ runner.DecisionLogger = (*manage.DecisionLog)(nil)

// event is what the receiver reads of one OPA decision-log event.
type event struct {
	Labels     map[string]string `json:"labels"`
	DecisionID string            `json:"decision_id"`
	Bundles    map[string]struct {
		Revision string `json:"revision"`
	} `json:"bundles"`
	Path      string         `json:"path"`
	Input     map[string]any `json:"input"`
	Result    map[string]any `json:"result"`
	Erased    []string       `json:"erased"`
	Custom    map[string]any `json:"custom"`
	Timestamp time.Time      `json:"timestamp"`
}

// Receiver states.
const (
	receiverUp     = iota
	receiverStatus // answers 503
	receiverClosed // closes the connection without an answer
)

// receiver is a decision-log service on loopback: it takes OPA's uploads
// (POST /logs, a gzip'd JSON array of events) while up.
type receiver struct {
	*httptest.Server
	state   atomic.Int32
	refused atomic.Int64 // uploads refused while down
	mu      sync.Mutex
	events  []event
}

func newReceiver(t testing.TB) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch rc.state.Load() {
		case receiverStatus:
			rc.refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case receiverClosed:
			rc.refused.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("upload %s %s encoding %q", r.Method, r.URL.Path, r.Header.Get("Content-Encoding"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Errorf("upload: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var batch []event
		if err := json.NewDecoder(zr).Decode(&batch); err != nil {
			t.Errorf("upload: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.events = append(rc.events, batch...)
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.events)
}

func ids(es []event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.DecisionID)
	}
	return out
}

// maskEnv is a mask policy that erases the names of the command's
// variables from every event.
const maskEnv = `package system.log

mask contains "/input/env"
`

// newManager builds and starts an OPA plugin manager from OPA's
// configuration: a service at url, labels, and decision_logs with
// reporting; the mask policy, if any, is in its store.
func newManager(t testing.TB, url string, reporting map[string]any, mask string) *plugins.Manager {
	t.Helper()
	pm := startManager(t, url, reporting, mask)
	t.Cleanup(func() { pm.Stop(context.Background()) })
	return pm
}

// startManager is newManager's manager, which the test stops.
func startManager(t testing.TB, url string, reporting map[string]any, mask string) *plugins.Manager {
	t.Helper()
	ctx := context.Background()
	store := inmem.New()
	if mask != "" {
		err := storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
			return store.UpsertPolicy(ctx, txn, "mask.rego", []byte(mask))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := json.Marshal(map[string]any{
		"services":      map[string]any{"logsvc": map[string]any{"url": url}},
		"labels":        map[string]any{"team": "infra"},
		"decision_logs": map[string]any{"service": "logsvc", "reporting": reporting},
	})
	if err != nil {
		t.Fatal(err)
	}
	quiet := logging.NewNoOpLogger()
	pm, err := plugins.New(cfg, "avfs-test", store, plugins.Logger(quiet), plugins.ConsoleLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	lc, err := logs.NewConfigBuilder().WithBytes(pm.Config.DecisionLogs).WithServices(pm.Services()).Parse()
	if err != nil {
		t.Fatal(err)
	}
	pm.Register(logs.Name, logs.New(lc, pm))
	if err := pm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return pm
}

// upload uploads what the plugin holds (manual trigger).
func upload(t *testing.T, pm *plugins.Manager) {
	t.Helper()
	if err := logs.Lookup(pm).Trigger(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func manual() map[string]any {
	return map[string]any{"trigger": "manual", "buffer_type": "event"}
}

func defaultPolicy(t testing.TB) *engine.Policy {
	t.Helper()
	ctx := context.Background()
	set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := engine.NewPolicy(ctx, set, engine.PolicyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newRunner(t testing.TB, l runner.DecisionLogger) *runner.Runner {
	t.Helper()
	return &runner.Runner{Store: vault.NewStore(t.TempDir(), vault.Options{Actor: "test"}), RunDir: t.TempDir(), TempDir: t.TempDir(),
		Sandbox: runner.SandboxConfig{Mode: runner.SandboxNone}, HostEnv: []string{"PATH=/usr/bin:/bin"}, Policy: defaultPolicy(t),
		DecisionLog: l}
}

// auditDecisionID is the decision_id of the exec audit row of the run
// envelope id.
func auditDecisionID(t *testing.T, r *runner.Runner, id string) string {
	t.Helper()
	ctx := context.Background()
	v, err := r.Store.Open(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	entries, err := v.Audit(ctx, vault.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Op == "exec" && e.Details["id"] == id {
			s, _ := e.Details["decision_id"].(string)
			return s
		}
	}
	t.Fatalf("no exec audit row of %s", id)
	return ""
}

// Every decision about a run (Exec, Precheck) and of POST /v1/decide
// reaches the log service with the id of the envelope, the precheck, the
// decide answer and the run's audit row; with its input, result, bundle
// revisions, source and the configuration's labels; masked by the mask
// policy.
func TestDecisionLogEvents(t *testing.T) {
	ctx := context.Background()
	rc := newReceiver(t)
	pm := newManager(t, rc.URL, manual(), maskEnv)
	r := newRunner(t, manage.NewDecisionLog(pm))

	run := runner.Request{Vault: "default", Shell: "echo hi > a.txt", Cwd: "/", Timeout: runner.DefaultTimeout, Env: []string{"SECRET_TOKEN=x"},
		MountMode: runner.ModeMaterialize, AllowWritableTrust: true}
	env, status := r.Exec(ctx, run)
	if status != 0 || env.Decision != wire.AllowWithCheckpoint || env.DecisionID == "" {
		t.Fatalf("run: status %d decision %s id %q error %+v", status, env.Decision, env.DecisionID, env.Error)
	}
	denied := runner.Request{Vault: "default", Argv: []string{"cat", "/etc/shadow"}, Cwd: "/", Timeout: runner.DefaultTimeout,
		AllowWritableTrust: true, Source: wire.SourceHook}
	pc, err := r.Precheck(ctx, denied)
	if err != nil || pc.Decision != wire.Deny {
		t.Fatalf("precheck %+v %v", pc, err)
	}
	dec, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"ls"}})
	if err != nil || dec.DecisionID == "" {
		t.Fatalf("decide %+v %v", dec, err)
	}
	if got := auditDecisionID(t, r, env.ID); got != env.DecisionID {
		t.Fatalf("audit row decision_id %q, envelope %q", got, env.DecisionID)
	}
	upload(t, pm)

	got := rc.received()
	type want struct {
		id       string
		source   wire.DecisionSource
		decision wire.Decision
		program  string
		bundles  []wire.BundleInfo
	}
	wants := []want{
		{env.DecisionID, wire.SourceExec, wire.AllowWithCheckpoint, "echo", env.Policy.Bundles},
		{pc.DecisionID, wire.SourceHook, wire.Deny, "cat", pc.Bundles},
		{dec.DecisionID, wire.SourceDecide, dec.Decision, "ls", dec.Bundles},
	}
	if !slices.Equal(ids(got), []string{wants[0].id, wants[1].id, wants[2].id}) {
		t.Fatalf("events %v, want %v", ids(got), wants)
	}
	for i, w := range wants {
		e := got[i]
		cmds, _ := e.Input["commands"].([]any)
		var program any
		if len(cmds) > 0 {
			program = cmds[0].(map[string]any)["program"]
		}
		if e.Path != "avfs/decision" || e.Custom["source"] != string(w.source) || e.Result["decision"] != string(w.decision) || program != w.program {
			t.Errorf("event %d: path %q source %v decision %v program %v", i, e.Path, e.Custom["source"], e.Result["decision"], program)
		}
		if len(w.bundles) == 0 || len(e.Bundles) != len(w.bundles) {
			t.Errorf("event %d: bundles %v, want %v", i, e.Bundles, w.bundles)
		}
		for _, b := range w.bundles {
			if e.Bundles[b.Name].Revision != b.Revision {
				t.Errorf("event %d: bundle %s revision %q, want %q", i, b.Name, e.Bundles[b.Name].Revision, b.Revision)
			}
		}
		if e.Labels["team"] != "infra" || e.Labels["id"] != "avfs-test" {
			t.Errorf("event %d: labels %v", i, e.Labels)
		}
		if _, ok := e.Input["env"]; ok || !slices.Equal(e.Erased, []string{"/input/env"}) {
			t.Errorf("event %d: input.env not masked: env %v erased %v", i, e.Input["env"], e.Erased)
		}
		if e.Timestamp.IsZero() {
			t.Errorf("event %d: no timestamp", i)
		}
	}
}

// Without the mask policy the same field does reach the service: the mask
// test above can fail.
func TestDecisionLogUnmasked(t *testing.T) {
	ctx := context.Background()
	rc := newReceiver(t)
	pm := newManager(t, rc.URL, manual(), "")
	r := newRunner(t, manage.NewDecisionLog(pm))
	if _, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"ls"}}); err != nil {
		t.Fatal(err)
	}
	upload(t, pm)
	got := rc.received()
	if len(got) != 1 || got[0].Input["env"] == nil || len(got[0].Erased) != 0 {
		t.Fatalf("events %+v", got)
	}
}

// While the service is down (503, or a connection closed without an
// answer) the plugin keeps the events and retries with backoff; once it
// is back, every event arrives, once.
func TestDecisionLogServiceDown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  int32
		buffer map[string]any
	}{
		{"503 event buffer", receiverStatus, map[string]any{"buffer_type": "event", "buffer_size_limit_events": 100}},
		{"closed event buffer", receiverClosed, map[string]any{"buffer_type": "event", "buffer_size_limit_events": 100}},
		{"503 size buffer", receiverStatus, map[string]any{"buffer_type": "size", "buffer_size_limit_bytes": 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rc := newReceiver(t)
			rc.state.Store(tc.state)
			reporting := map[string]any{"trigger": "periodic", "min_delay_seconds": 1, "max_delay_seconds": 1}
			maps.Copy(reporting, tc.buffer)
			pm := newManager(t, rc.URL, reporting, "")
			r := newRunner(t, manage.NewDecisionLog(pm))
			var want []string
			for range 5 {
				res, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"ls"}})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, res.DecisionID)
			}
			deadline := time.Now().Add(20 * time.Second)
			for rc.refused.Load() < 2 { // a first upload and a retry were refused
				if time.Now().After(deadline) {
					t.Fatalf("%d uploads tried while down", rc.refused.Load())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := len(rc.received()); n != 0 {
				t.Fatalf("%d events received while down", n)
			}
			rc.state.Store(receiverUp)
			for len(rc.received()) < len(want) {
				if time.Now().After(deadline) {
					t.Fatalf("received %v after the service came back, want %v", ids(rc.received()), want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			got := ids(rc.received())
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("received %v, want %v", got, want)
			}
		})
	}
}

// A process that ends (a one-shot avfs) stops its manager with a
// deadline: the plugin uploads what it holds before it stops, long
// before its next periodic upload.
func TestDecisionLogFlushOnStop(t *testing.T) {
	ctx := context.Background()
	rc := newReceiver(t)
	pm := startManager(t, rc.URL, map[string]any{"trigger": "periodic", "min_delay_seconds": 300, "max_delay_seconds": 600}, "")
	r := newRunner(t, manage.NewDecisionLog(pm))
	var want []string
	for range 3 {
		res, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"ls"}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.DecisionID)
	}
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pm.Stop(stop)
	if got := ids(rc.received()); !slices.Equal(got, want) {
		t.Fatalf("received %v on stop, want %v", got, want)
	}
}

// A buffer that is full drops its oldest events (reporting.buffer_size_
// limit_events of the event buffer): the newest arrive.
func TestDecisionLogBufferDropsOldest(t *testing.T) {
	ctx := context.Background()
	rc := newReceiver(t)
	reporting := manual()
	reporting["buffer_size_limit_events"] = 3
	pm := newManager(t, rc.URL, reporting, "")
	r := newRunner(t, manage.NewDecisionLog(pm))
	var all []string
	for range 5 {
		res, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"ls"}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, res.DecisionID)
	}
	upload(t, pm)
	if got := ids(rc.received()); !slices.Equal(got, all[2:]) {
		t.Fatalf("received %v, want the newest three %v of %v", got, all[2:], all)
	}
}

// A manager whose configuration has no decision_logs gives no decision
// log, and a nil one logs nothing.
func TestNewDecisionLogNone(t *testing.T) {
	pm, err := plugins.New([]byte(`{"labels":{"team":"infra"}}`), "avfs-test", inmem.New())
	if err != nil {
		t.Fatal(err)
	}
	if d := manage.NewDecisionLog(pm); d != nil {
		t.Fatalf("decision log %+v without decision_logs", d)
	}
	if d := manage.NewDecisionLog(nil); d != nil {
		t.Fatal("decision log of no manager")
	}
	var d *manage.DecisionLog
	if err := d.LogDecision(context.Background(), "id", wire.SourceExec, &wire.Input{}, wire.PolicyResult{}); err != nil {
		t.Fatal(err)
	}
	// Set on a Runner as is (a nil *DecisionLog in the interface), it
	// logs nothing and decides as before.
	r := newRunner(t, manage.NewDecisionLog(pm))
	if res, err := server.Decide(context.Background(), r, wire.DecideRequest{Argv: []string{"ls"}}); err != nil || res.DecisionID == "" {
		t.Fatalf("decide %+v %v", res, err)
	}
}

// A decision the log does not take stands: the run goes on as decided.
func TestDecisionLogFailureKeepsDecision(t *testing.T) {
	ctx := context.Background()
	l := &failingLog{}
	r := newRunner(t, l)
	env, status := r.Exec(ctx, runner.Request{Vault: "default", Shell: "echo hi > a.txt", Cwd: "/", Timeout: runner.DefaultTimeout,
		MountMode: runner.ModeMaterialize, AllowWritableTrust: true})
	if status != 0 || env.Decision != wire.AllowWithCheckpoint || env.Error != nil || env.DecisionID == "" {
		t.Fatalf("status %d decision %s error %+v", status, env.Decision, env.Error)
	}
	if _, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"ls"}}); err != nil {
		t.Fatal(err)
	}
	if n := l.calls.Load(); n != 2 {
		t.Fatalf("the log was asked %d times, want 2", n)
	}
}

// failingLog refuses every decision.
type failingLog struct{ calls atomic.Int64 }

func (l *failingLog) LogDecision(context.Context, string, wire.DecisionSource, *wire.Input, wire.PolicyResult) error {
	l.calls.Add(1)
	return fmt.Errorf("log service gone")
}

// BenchmarkLogDecision is the cost of handing one decision of the default
// policy to the plugin (the upload is the plugin's, in the background).
func BenchmarkLogDecision(b *testing.B) {
	ctx := context.Background()
	rc := newReceiver(b)
	pm := newManager(b, rc.URL, map[string]any{"trigger": "periodic", "min_delay_seconds": 1, "max_delay_seconds": 1}, "")
	d := manage.NewDecisionLog(pm)
	r := newRunner(b, nil)
	res, err := server.Decide(ctx, r, wire.DecideRequest{Argv: []string{"git", "status"}, Input: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := d.LogDecision(ctx, res.DecisionID, wire.SourceDecide, res.Input, res.PolicyResult); err != nil {
			b.Fatal(err)
		}
	}
}
