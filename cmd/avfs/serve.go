package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"avfs/bundles"
	"avfs/engine"
	"avfs/runner"
	"avfs/server"
	"avfs/wire"
	"avfs/workspace"
)

// defaultSocket is where avfs serve listens, and where proxy exec finds it
// with --server default.
func defaultSocket(home string) string { return filepath.Join(home, "run", "avfs.sock") }

func serveCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "keep the policy warm and answer runs and decisions over HTTP (docs/serve.md)",
		UsageText: "avfs serve [--listen unix:PATH | --listen tcp:ADDR --token-file FILE] [--bundle DIR|FILE.tar.gz]… [--config-file OPA-CONFIG]\n\n" +
			"example: avfs serve & AVFS_SERVER=$AVFS_HOME/run/avfs.sock avfs --json proxy exec -- git status",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Usage: "answer on `ADDR`: unix:PATH, or tcp:HOST:PORT with --token-file (default: unix:$AVFS_HOME/run/avfs.sock)"},
			&cli.StringFlag{Name: "token-file", Usage: "require \"Authorization: Bearer TOKEN\" with the token in `FILE`"},
			&cli.DurationFlag{Name: "grace", Value: server.DefaultGrace, Usage: "on SIGTERM or SIGINT, let runs finish for `DURATION`, then interrupt them"},
			&cli.DurationFlag{Name: "poll", Value: server.DefaultPoll, Usage: "look for changed bundle and config files every `DURATION` (0: never)"},
			&cli.BoolFlag{Name: "prepare-sandboxes", Value: true, Usage: "while no run is under way, build the part of the next run's sandbox that does not depend on it (false: build each when its run starts)"},
		}, bundleFlags()...),
		Action: func(c *cli.Context) error {
			listen := c.String("listen")
			if listen == "" {
				if _, err := runner.OpenRunDir(filepath.Join(e.home, "run")); err != nil {
					return err
				}
				listen = "unix:" + defaultSocket(e.home)
			}
			var token []byte
			if f := c.String("token-file"); f != "" {
				b, err := os.ReadFile(f)
				if err != nil {
					return wire.Errorf(wire.CodeInvalidInput, "serve: --token-file: %v", err)
				}
				if token = bytes.TrimSpace(b); len(token) == 0 {
					return usageError("serve: --token-file %s is empty", f)
				}
			}
			if strings.HasPrefix(listen, "tcp:") && token == nil {
				return usageError("serve: --listen tcp: needs --token-file")
			}
			poll := c.Duration("poll")
			if poll == 0 {
				poll = -1
			}
			logger := log.New(e.stderr, "avfs serve: ", log.LstdFlags)
			exe, err := os.Executable()
			if err != nil {
				return wire.Errorf(wire.CodeInternal, "serve: where is avfs: %v", err)
			}
			sp, err := e.startServePolicy(c)
			if err != nil {
				return err
			}
			srv, err := server.New(c.Context, server.Config{Load: e.serveLoader(c, sp), Poll: poll, Grace: c.Duration("grace"),
				Token: token, Version: version, Log: logger, BuildSandboxes: !c.Bool("prepare-sandboxes"), Hooks: server.HookConfig{Exe: exe,
					Workspace: hookWorkspace(workspace.Registry{Home: e.home}), Forward: forwardPrecheck(e)}, Managed: sp.managed()})
			if err != nil {
				return err
			}
			if sp != nil {
				sp.attach(srv)
			}
			ln, err := server.Listen(listen)
			if err != nil {
				return err
			}
			defer ln.Close()
			logger.Printf("listening on %s (pid %d)", listen, os.Getpid())
			// Vault replication (replicate.go): a replicator process per
			// vault with a replica, stopped when serve stops.
			defer startReplicators(c.Context, e, exe, poll, logger.Printf)()
			return srv.Serve(c.Context, ln)
		},
	}
}

// serveLoader loads what proxy exec would run with: the config, its
// approver keys and sandbox, and the policy compiled (with sp, OPA's
// plugins' bundles too). It watches the config, the policy directory,
// the bundles and the keys (and OPA's configuration: a change to it is
// refused until a restart).
func (e *env) serveLoader(c *cli.Context, sp *servePolicy) server.Loader {
	return func(ctx context.Context) (*runner.Runner, []string, error) {
		watch := []string{configPath(e.home), filepath.Join(e.home, "policy")}
		cfg, err := loadConfig(e.home)
		if err != nil {
			return nil, watch, err
		}
		opts := e.bundleOptionsOf(c, cfg)
		// OPA's configuration is watched (a change to it is refused until
		// a restart), not its persistence directory: what OPA's plugins
		// persist there reaches the policy through them.
		watch = append(trustedPaths(e.home, cfg, opts, nil), configPath(e.home))
		if sp != nil {
			watch = append(watch, sp.path)
		}
		r, err := e.proxyRunner(c)
		if err != nil {
			return nil, watch, err
		}
		var p *engine.Policy
		if sp == nil {
			p, _, err = compilePolicy(ctx, opts, cfg.Policy.engineOptions())
		} else {
			var set *bundles.Set
			if set, err = bundles.Load(ctx, opts); err == nil {
				p, err = sp.policy(ctx, set, cfg.Policy.engineOptions())
			}
		}
		if err != nil {
			return nil, watch, fmt.Errorf("load policy: %w", err)
		}
		r.Policy, r.LoadPolicy = p, nil
		return r, watch, nil
	}
}
