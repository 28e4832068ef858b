package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/bundles"
	"avfs/engine"
	"avfs/manage"
	"avfs/runner"
	"avfs/wire"
	"avfs/workspace"
)

func proxyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "proxy",
		Usage:     "run an agent's command under policy in the vault",
		UsageText: "avfs proxy exec [options] -- CMD [ARG…]\n\nexample: avfs --json proxy exec -- git status",
		Subcommands: []*cli.Command{
			proxyExecCommand(e),
			{
				Name:   "guard",
				Hidden: true,
				Usage:  "clean up after a run whose avfs was killed (started by proxy exec)",
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "RUN_DIR")
					if err != nil {
						return err
					}
					runner.Guard(c.Context, e.stdin, a[0])
					return nil
				},
			},
		},
	}
}

func proxyExecCommand(e *env) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "shell", Usage: "run `SCRIPT` with /bin/sh -c instead of a command after --"},
		&cli.StringFlag{Name: "cwd", Value: "/", Usage: "working `DIR` inside the vault"},
		&cli.DurationFlag{Name: "timeout", Value: runner.DefaultTimeout, Usage: "end the command after `DURATION` (0: never)"},
		&cli.DurationFlag{Name: "kill-grace", Value: runner.DefaultKillGrace, Usage: "time between SIGTERM and SIGKILL"},
		&cli.StringFlag{Name: "max-output", Value: "1MiB", Usage: "bytes of stdout and of stderr kept (head and tail), e.g. 64KiB"},
		&cli.IntFlag{Name: "max-changes", Value: runner.DefaultMaxChanges, Usage: "list at most `N` changes in the envelope, the first by path (0: all); changes_total counts them all"},
		&cli.BoolFlag{Name: "stream", Usage: "also copy the output live (to stderr with --json)"},
		&cli.BoolFlag{Name: "stdin", Usage: "pass avfs's stdin to the command (default /dev/null)"},
		&cli.StringSliceFlag{Name: "env", Usage: "pass `KEY` from avfs's environment, or set KEY=VALUE (repeatable)"},
		&cli.StringFlag{Name: "mountpoint", Usage: "show the vault to the command at `DIR` (the same path on every run) instead of a private temporary directory; made if missing"},
		&cli.StringFlag{Name: "mount-mode", Value: runner.ModeAuto, Usage: "fuse, materialize, or auto (fuse when available and permitted, else a materialised copy)"},
		&cli.StringFlag{Name: "approval", Usage: "run under the granted approval `ID`"},
		&cli.DurationFlag{Name: "ttl", Value: runner.DefaultTTL, Usage: "how long a new approval request stays valid"},
		&cli.BoolFlag{Name: "rollback-on-failure", Usage: "restore the vault when the command fails or times out"},
		&cli.DurationFlag{Name: "wait", Value: runner.DefaultBusyWait, Usage: "wait up to `DURATION` while another run or a writer mount holds the vault (then fail with vault_busy)"},
		&cli.StringFlag{Name: "explain", Usage: "add the policy trace: notes, fails or full"},
		&cli.StringFlag{Name: "sandbox", Usage: "hold the command in `MODE`: auto (namespaces where the kernel allows them, else none, said in the envelope), namespaces (or fail with exit 125), or none (the host's whole authority) (default: sandbox.mode of the config, else auto)"},
		&cli.BoolFlag{Name: "allow-writable-trust", Usage: "without a sandbox, run even though the command could rewrite the config, policy or approver keys avfs trusts"},
		&cli.BoolFlag{Name: "preview", Usage: "when the command needs approval, run it first in a throwaway fork with the network off and ask approval for its changes: approval grant applies exactly them (no second run) if the vault did not change meanwhile"},
		&cli.StringFlag{Name: "fork", Usage: "run in a new fork `NAME` of the vault (O(1); fails with already_exists when NAME is taken), leaving the vault untouched; avfs vault merge NAME merges it back. The envelope's vault is NAME, forked_from the vault; a run whose command did not start (denied, say) deletes the fork. Runs in this process, not through avfs serve"},
		&cli.BoolFlag{Name: "readonly", Usage: "the command can change nothing: the vault is mounted read-only (a materialised copy is thrown away), so no checkpoint is taken"},
	}
	return &cli.Command{
		Name:  "exec",
		Usage: "parse, decide, checkpoint, mount, run, report",
		UsageText: "avfs proxy exec [options] -- CMD [ARG…]\n" +
			"avfs proxy exec [options] --shell SCRIPT\n\n" +
			"Exit status: the command's; 124 timed out; 125 avfs failed; 126 not run (deny or\n" +
			"require_approval); 127 program not found; 128+N killed by signal N.\n\n" +
			"example: avfs --json proxy exec --timeout 60s -- make test",
		Flags: append(append(flags, serverFlag()), bundleFlags()...),
		Action: func(c *cli.Context) error {
			start := time.Now()
			argv := c.Args().Slice()
			shell := c.String("shell")
			switch {
			case shell != "" && len(argv) > 0:
				return usageError("proxy exec: give a command after -- or --shell, not both")
			case shell == "" && len(argv) == 0:
				return usageError("proxy exec: missing command (usage: avfs proxy exec [options] -- CMD [ARG…])")
			}
			maxOut, err := parseSize(c.String("max-output"))
			if err != nil {
				return err // a usage error, like a bad --timeout
			}
			maxChanges := c.Int("max-changes")
			switch {
			case maxChanges < 0:
				return usageError("proxy exec: --max-changes must be 0 (all) or more")
			case maxChanges == 0:
				maxChanges = -1
			}
			for _, f := range []string{"timeout", "kill-grace", "ttl", "wait"} {
				if c.Duration(f) < 0 {
					return usageError("proxy exec: --%s must not be negative (got %s)", f, c.Duration(f))
				}
			}
			req := runner.Request{
				Vault: e.vaultName(), Argv: argv, Shell: shell, Cwd: c.String("cwd"),
				Timeout: c.Duration("timeout"), KillGrace: c.Duration("kill-grace"), MaxOutput: maxOut, MaxChanges: maxChanges,
				Env: c.StringSlice("env"), Mountpoint: c.String("mountpoint"), MountMode: c.String("mount-mode"),
				ApprovalID: c.String("approval"), ApprovalTTL: c.Duration("ttl"),
				RollbackOnFailure: c.Bool("rollback-on-failure"), BusyWait: c.Duration("wait"), Explain: c.String("explain"), Readonly: c.Bool("readonly"),
				Sandbox: c.String("sandbox"), AllowWritableTrust: c.Bool("allow-writable-trust"), Fork: c.String("fork"), Preview: c.Bool("preview"),
			}
			if c.IsSet("fork") && req.Fork == "" {
				return usageError("proxy exec: --fork needs a NAME for the new fork")
			}
			if c.Bool("stdin") {
				req.Stdin = e.stdin
			}
			if c.Bool("stream") {
				req.Stdout, req.Stderr = e.stdout, e.stderr
				if e.json {
					req.Stdout = e.stderr
				}
			}
			addr, ws, err := e.execServer(c, req.Vault)
			if req.Fork != "" {
				// The run is in a new vault no workspace serves: here.
				addr, ws, err = "", nil, nil
			}
			if err != nil {
				env, status := runner.Failed(req, start, err)
				return e.printRun(c, env, status)
			}
			env, status, served := e.serverExec(c, req, addr)
			if !served && ws != nil {
				// The workspace's avfs alone may change its vault: an
				// in-process run would wait for it and fail vault_busy.
				env, status = runner.Failed(req, start, wire.Errorf(wire.CodeVaultBusy,
					"proxy exec: the vault %s is the workspace at %s, served by pid %d, which did not take the run (see above); --stdin and --stream runs cannot go through it", ws.Vault, ws.Dir, ws.PID).
					With("holder_pid", ws.PID).With("dir", ws.Dir))
				served = true
			}
			if !served {
				r, err := e.proxyRunner(c)
				if err != nil {
					// Past the command line, every failure is an envelope.
					env, status = runner.Failed(req, start, err)
				} else {
					p := e.progress("materialise", "files")
					req.Progress = p.report()
					env, status = r.Exec(c.Context, req)
					p.finish()
				}
			}
			return e.printRun(c, env, status)
		},
	}
}

// printRun prints a run's envelope (JSON, or for people) and ends with its
// exit status.
func (e *env) printRun(c *cli.Context, env *wire.Envelope, status int) error {
	if e.json {
		e.printed = true
		if err := writeJSON(e.stdout, env); err != nil {
			return err
		}
		return &exitStatus{code: status}
	}
	printEnvelope(e, env, c.Bool("stream"))
	return &exitStatus{code: status}
}

// execServer is the avfs serve socket a run of vault goes through: the one
// --server (or AVFS_SERVER) names, else that of the live workspace whose
// vault it is (ws), else "" (in-process).
func (e *env) execServer(c *cli.Context, vaultName string) (addr string, ws *workspace.Live, err error) {
	if addr := c.String("server"); addr != "" {
		return serveSocket(e.home, addr), nil, nil
	}
	ws, err = workspace.Registry{Home: e.home}.ForVault(vaultName)
	if err != nil || ws == nil {
		return "", nil, err
	}
	return ws.Socket, ws, nil
}

// proxyRunner is the runner of proxy exec: the config's approver key and
// environment, and the policy of the bundle options, which the runner loads
// while it opens the vault.
func (e *env) proxyRunner(c *cli.Context) (*runner.Runner, error) {
	cfg, err := loadConfig(e.home)
	if err != nil {
		return nil, err
	}
	key, err := approverKey(cfg, false)
	if err != nil {
		return nil, err
	}
	pub, err := approverPublicKey(cfg)
	if err != nil {
		return nil, err
	}
	opts, opaPath := e.bundleOptionsOf(c, cfg), opaConfigPath(c, cfg)
	opa, err := e.loadOPAConfig(opaPath)
	if err != nil {
		return nil, err
	}
	load := func(ctx context.Context) (*engine.Policy, error) {
		p, _, err := e.policyOf(ctx, opts, opaPath, cfg)
		return p, err
	}
	sb, err := e.sandboxOf(cfg)
	if err != nil {
		return nil, err
	}
	store, err := e.store()
	if err != nil {
		return nil, err
	}
	exe, _ := os.Executable() // for the run's guard and the sandbox's init
	return &runner.Runner{Store: store, LoadPolicy: load, Exe: exe, HostEnv: os.Environ(), ExtraEnv: cfg.Proxy.Env, ApproverKey: key, ApproverPublicKey: pub,
		RunDir: filepath.Join(e.home, "run"), Sandbox: sb, Trusted: trustedPaths(e.home, cfg, opts, opa), SkipEffects: cfg.Policy.SkipEffects,
		DecisionLog: decisionLog{e}}, nil
}

// trustedPaths are the files and directories whose content decides what
// proxy exec allows: the config, the policy directory and bundles, the
// bundle verification key, the approver keys, and OPA's configuration and
// the persistence directory of its plugins (opa, nil without). The audit key is not
// among them: it decides nothing, and it exists once a vault changed, so
// every run without a sandbox would be refused; such a run has avfs's own
// authority over the vaults and the key alike (docs/vault.md says what the
// audit log then proves).
func trustedPaths(home string, cfg config, opts bundles.Options, opa *manage.Config) []string {
	paths := []string{configPath(home), opts.HomePolicyDir, cfg.Approval.KeyFile, cfg.Approval.PublicKeyFile}
	paths = append(paths, opts.Paths...)
	if opa != nil {
		paths = append(paths, opa.Path, opa.PersistenceDirectory)
	}
	if fileExists(opts.VerificationKey) {
		paths = append(paths, opts.VerificationKey)
	}
	return paths
}

// sandboxOf is the runner's sandbox configuration from the config's
// "sandbox" section.
func (e *env) sandboxOf(cfg config) (runner.SandboxConfig, error) {
	c := cfg.Sandbox
	sb := runner.SandboxConfig{Mode: c.Mode, Workspace: c.Workspace, HomeFiles: c.HomeFiles,
		GitName: c.GitIdentity.Name, GitEmail: c.GitIdentity.Email, CacheDir: filepath.Join(e.home, "cache")}
	if c.Workspace != "" && (!filepath.IsAbs(c.Workspace) || filepath.Clean(c.Workspace) == "/") {
		return sb, wire.Errorf(wire.CodeInvalidInput, "config: sandbox.workspace must be an absolute path other than /, not %q", c.Workspace)
	}
	for _, f := range []struct {
		text string
		to   *int64
		name string
	}{{c.TmpSize, &sb.TmpSize, "tmp_size"}, {c.CacheSize, &sb.CacheMax, "cache_size"}} {
		if f.text == "" {
			continue
		}
		n, err := parseSize(f.text)
		if err != nil {
			return sb, wire.Errorf(wire.CodeInvalidInput, "config: sandbox.%s: %v", f.name, err)
		}
		*f.to = n
	}
	return sb, nil
}

// printEnvelope shows a run to people: the command's output, then one summary line on stderr.
func printEnvelope(e *env, env *wire.Envelope, streamed bool) {
	if p := env.Process; p != nil && !streamed {
		for _, s := range []struct {
			w        io.Writer
			text     string
			encoding string
		}{{e.stdout, p.Stdout, p.StdoutEncoding}, {e.stderr, p.Stderr, p.StderrEncoding}} {
			if s.encoding == "base64" {
				fmt.Fprintf(e.stderr, "avfs: (binary output, %d bytes, shown with --json as base64)\n", len(s.text)*3/4)
				continue
			}
			io.WriteString(s.w, s.text)
		}
	}
	var parts []string
	parts = append(parts, "decision "+string(env.Decision))
	for _, r := range env.Policy.Reasons {
		parts = append(parts, fmt.Sprintf("%s: %s", r.ID, r.Message))
	}
	if env.ForkedFrom != "" && env.Process != nil {
		parts = append(parts, fmt.Sprintf("in fork %s of %s (merge it back with: avfs vault merge %s)", env.Vault, env.ForkedFrom, env.Vault))
	}
	if env.Checkpoint != nil {
		parts = append(parts, fmt.Sprintf("checkpoint %d", env.Checkpoint.ID))
	}
	if a := env.Approval; a != nil {
		s := fmt.Sprintf("approval %s %s", a.ID, a.Status)
		if a.Status == "pending" {
			s += fmt.Sprintf(" (grant with: avfs approval grant %s; then run again with --approval %s)", a.ID, a.ID)
		}
		parts = append(parts, s)
	}
	if p := env.Process; p != nil {
		s := fmt.Sprintf("exit %d", p.ExitCode)
		if p.TimedOut {
			s += " (timed out)"
		}
		if p.Interrupted != "" {
			s += " (interrupted: " + p.Interrupted + " forwarded)"
		}
		changes := fmt.Sprintf("%d change(s)", env.ChangesTotal)
		if env.ChangesTruncated {
			changes += fmt.Sprintf(" (%d listed with --json)", len(env.Changes))
		}
		if m := env.Mount; m != nil && m.Discarded > 0 {
			changes += fmt.Sprintf(", %d discarded (--readonly copy)", m.Discarded)
		}
		parts = append(parts, s, changes)
	}
	if env.Rollback != nil {
		parts = append(parts, "rolled back")
	}
	for _, h := range env.Hints {
		s := fmt.Sprintf("hint %s: %s", h.Code, h.Message)
		if h.Command != "" {
			s += " (the hint's command: " + h.Command + ")"
		}
		parts = append(parts, s)
	}
	if env.Error != nil {
		parts = append(parts, "error: "+env.Error.Message)
	}
	fmt.Fprintf(e.stderr, "avfs: %s\n", strings.Join(parts, "; "))
}

// parseSize reads a byte count such as 1048576, 512KiB, 1MiB or 2MB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, usageError("invalid size %q: want a positive byte count such as 65536, 64KiB or 1MiB", s)
	}
	return n * mult, nil
}
