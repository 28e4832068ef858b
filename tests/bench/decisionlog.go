package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
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

func init() { register("47-decisionlog", decisionLogBench) }

// decisionLogBench times the decision of POST /v1/decide (server.Decide:
// parse, decide) without a decision log, with OPA's decision-log plugin
// uploading to a log service on loopback, and with a mask policy as
// well, in turns in one process.
func decisionLogBench(ctx context.Context, cfg config) ([]section, error) {
	const n = 2000
	var received atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var batch []json.RawMessage
		if err := json.NewDecoder(zr).Decode(&batch); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		received.Add(int64(len(batch)))
	}))
	defer svc.Close()

	set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true})
	if err != nil {
		return nil, err
	}
	p, err := engine.NewPolicy(ctx, set, engine.PolicyOptions{})
	if err != nil {
		return nil, err
	}
	home := filepath.Join(cfg.Work, "decisionlog-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	store := vault.NewStore(home, vault.Options{Actor: "bench"})
	if v, err := store.OpenOrCreate(ctx, "default"); err != nil {
		return nil, err
	} else {
		v.Close()
	}
	vaults := runner.NewVaultCache(4, time.Minute)
	defer vaults.Close()
	newRunner := func(l runner.DecisionLogger) *runner.Runner {
		return &runner.Runner{Store: store, Policy: p, Vaults: vaults, DecisionLog: l}
	}
	plain := newRunner(nil)
	logged, stopLogged, err := benchManager(ctx, svc.URL, "")
	if err != nil {
		return nil, err
	}
	masked, stopMasked, err := benchManager(ctx, svc.URL, "package system.log\n\nmask contains \"/input/env\"\n")
	if err != nil {
		stopLogged()
		return nil, err
	}
	withLog, withMask := newRunner(manage.NewDecisionLog(logged)), newRunner(manage.NewDecisionLog(masked))
	req := wire.DecideRequest{Argv: []string{"git", "status"}}
	decide := func(r *runner.Runner) func() error {
		return func() error {
			res, err := server.Decide(ctx, r, req)
			if err == nil && res.Decision != wire.Allow {
				err = fmt.Errorf("git status: %s", res.Decision)
			}
			return err
		}
	}
	times, err := timeInTurns(n, decide(plain), decide(withLog), decide(withMask))
	stopLogged()
	stopMasked()
	if err != nil {
		return nil, err
	}
	base := median(times[0])
	s := section{
		Title: "Decision logs: overhead per decision",
		Intro: fmt.Sprintf("The decision of `POST /v1/decide {\"argv\":[\"git\",\"status\"]}` (server.Decide: parse and decide, vault kept open) "+
			"without a decision log, with OPA's decision-log plugin (size buffer, periodic upload to a log service on loopback), and with a mask "+
			"policy (`data.system.log.mask` erasing `/input/env`) as well; %d decisions each after one to warm up, the rows taking turns.", n),
		Header: []string{"decision log", "median", "p99", "added (median)"},
	}
	for i, name := range []string{"none", "OPA decision_logs", "OPA decision_logs + mask policy"} {
		added := "—"
		if i > 0 {
			added = fmtDur(median(times[i]) - base)
		}
		s.Rows = append(s.Rows, []string{name, fmtDur(median(times[i])), fmtDur(p99(times[i])), added})
	}
	want := int64(2 * (n + 1))
	s.Notes = append(s.Notes, fmt.Sprintf("The log service received %d of the %d logged events once the plugins stopped (they flush on stop).", received.Load(), want))
	return []section{s}, nil
}

// benchManager is an OPA plugin manager whose decision_logs upload to url
// every second, with mask (if any) as its mask policy, started; stop
// flushes and stops it.
func benchManager(ctx context.Context, url, mask string) (*plugins.Manager, func(), error) {
	store := inmem.New()
	if mask != "" {
		err := storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
			return store.UpsertPolicy(ctx, txn, "mask.rego", []byte(mask))
		})
		if err != nil {
			return nil, nil, err
		}
	}
	cfg, err := json.Marshal(map[string]any{
		"services":      map[string]any{"logsvc": map[string]any{"url": url}},
		"decision_logs": map[string]any{"service": "logsvc", "reporting": map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 1}},
	})
	if err != nil {
		return nil, nil, err
	}
	quiet := logging.New()
	quiet.SetLevel(logging.Error)
	pm, err := plugins.New(cfg, "avfs-bench", store, plugins.Logger(quiet), plugins.ConsoleLogger(quiet))
	if err != nil {
		return nil, nil, err
	}
	lc, err := logs.NewConfigBuilder().WithBytes(pm.Config.DecisionLogs).WithServices(pm.Services()).Parse()
	if err != nil {
		return nil, nil, err
	}
	pm.Register(logs.Name, logs.New(lc, pm))
	if err := pm.Start(ctx); err != nil {
		return nil, nil, err
	}
	return pm, func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		pm.Stop(stop)
	}, nil
}
