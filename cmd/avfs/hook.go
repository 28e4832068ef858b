package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"avfs/hooks"
	"avfs/runner"
	"avfs/wire"
	"avfs/workspace"
)

func hookCommand(e *env) *cli.Command {
	subs := []*cli.Command{}
	for _, h := range hooks.Harnesses {
		subs = append(subs, hookHarnessCommand(e, h))
	}
	subs = append(subs, hookInstallCommand(e))
	return &cli.Command{
		Name:  "hook",
		Usage: "answer an agent harness's tool hooks with the policy (Claude Code, Codex, Gemini CLI)",
		Description: `A harness runs "avfs hook HARNESS" before a tool call, with the call's JSON on
stdin. Shell commands the policy lets run are rewritten to run through
"avfs proxy exec" in the vault; denied ones are blocked with the rules
that fired; require_approval waits for "avfs approval grant". Any failure
blocks the call. "avfs hook install HARNESS" registers the hook.
See docs/integrations.md.`,
		Subcommands: subs,
	}
}

func hookHarnessCommand(e *env, h hooks.Harness) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "project", Usage: "the host `DIR` that is the vault's root: a cwd beneath it runs in the same vault directory (default: $CLAUDE_PROJECT_DIR or $GEMINI_PROJECT_DIR, else the hook's cwd)"},
		serverFlag(),
		&cli.DurationFlag{Name: "timeout", Value: hooks.DefaultTimeout, Usage: "block the call when no decision came within `DURATION`"},
	}
	if h == hooks.ClaudeCode {
		flags = append(flags, &cli.BoolFlag{Name: "headless", Usage: "no person to ask (claude -p): require_approval answers defer instead of ask"})
	}
	return &cli.Command{
		Name:      string(h),
		Usage:     "answer one " + string(h) + " hook (JSON on stdin, the answer on stdout)",
		UsageText: "avfs [--vault NAME] hook " + string(h) + " [options] < payload.json",
		Flags:     append(flags, bundleFlags()...),
		Action: func(c *cli.Context) error {
			exe, _ := os.Executable()
			project := c.String("project")
			if project == "" {
				project = os.Getenv("CLAUDE_PROJECT_DIR")
				if h == hooks.Gemini {
					project = os.Getenv("GEMINI_PROJECT_DIR")
				}
			}
			o := hooks.Options{Exe: exe, Project: project, Headless: c.Bool("headless"), Timeout: c.Duration("timeout")}
			if addr := c.String("server"); addr != "" {
				o.Server = addr
				if addr != "default" {
					o.Server = serveSocket(e.home, addr)
				}
			}
			o.Workspace = hookWorkspace(workspace.Registry{Home: e.home})
			d := &runnerDecider{e: e, c: c}
			if o.Server != "" {
				d.server = serveSocket(e.home, o.Server)
			}
			a := hooks.Run(c.Context, h, d, o, e.stdin)
			e.printed = true // the answer is the harness's document, --json or not
			if _, err := e.stdout.Write(a.Stdout); err != nil {
				return &exitStatus{code: 2}
			}
			io.WriteString(e.stderr, a.Stderr)
			return &exitStatus{code: a.Exit}
		},
	}
}

// hookHarness reports which harness args answer a hook for ("avfs
// [global flags] hook claude-code …"), if any; "hook install" is none.
func hookHarness(args []string) (hooks.Harness, bool) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "", false
		case a == "--vault" || a == "-vault":
			i++ // its value
		case strings.HasPrefix(a, "-"):
		case a == "hook":
			if i+1 < len(args) {
				for _, h := range hooks.Harnesses {
					if args[i+1] == string(h) {
						return h, true
					}
				}
			}
			return "", false
		default:
			return "", false
		}
	}
	return "", false
}

// runnerDecider decides as proxy exec does (runner.Precheck): through the
// avfs serve at server (POST /v1/precheck, the policy kept warm) when one
// is named, else — and when that daemon does not answer, said on stderr
// only (the harness's answer and exit status stay the decision's) — with
// the runner proxy exec would build. It builds that on first use, so that
// a config or key that cannot be read is an error of Decide, which blocks
// the call. An error document from the daemon is an error too: it never
// falls back on a daemon that answered.
type runnerDecider struct {
	e      *env
	c      *cli.Context
	server string // the avfs serve socket; "" for none
	once   sync.Once
	r      *runner.Runner
	err    error
}

func (d *runnerDecider) Decide(ctx context.Context, cmd hooks.Command) (hooks.Verdict, error) {
	req := hookRequest(d.e, cmd)
	if cmd.Vault != "" && cmd.Server != "" && cmd.Server != d.server {
		return forwardPrecheck(d.e)(ctx, cmd)
	}
	if d.server != "" {
		if f := setBundleFlag(d.c); f != "" {
			fmt.Fprintf(d.e.stderr, "avfs hook: --%s is not passed to avfs serve: deciding in-process\n", f)
		} else {
			res, ok, note, err := serverPrecheck(ctx, d.server, req)
			if err != nil {
				return hooks.Verdict{}, err
			}
			if ok {
				return verdictOf(res), nil
			}
			fmt.Fprintf(d.e.stderr, "avfs hook: %s: deciding in-process\n", note)
		}
	}
	d.once.Do(func() { d.r, d.err = d.e.proxyRunner(d.c) })
	if d.err != nil {
		return hooks.Verdict{}, d.err
	}
	pc, err := d.r.Precheck(ctx, req)
	if err != nil {
		return hooks.Verdict{}, err
	}
	res := wire.PrecheckResult{Decision: pc.Decision, Reasons: pc.Reasons, Vault: pc.Vault}
	if a := pc.Approval; a != nil {
		res.Approval = &wire.PrecheckApproval{ID: a.ID, Status: a.Status}
	}
	return verdictOf(res), nil
}

// verdictOf is the hook's verdict of a precheck's result.
func verdictOf(res wire.PrecheckResult) hooks.Verdict {
	v := hooks.Verdict{Decision: res.Decision, Reasons: res.Reasons, Vault: res.Vault}
	if a := res.Approval; a != nil {
		v.Approval = &hooks.Approval{ID: a.ID, Status: a.Status}
	}
	return v
}

// setBundleFlag is the first bundle flag set on c, or "".
func setBundleFlag(c *cli.Context) string {
	for _, f := range []string{"bundle", "verification-key", "no-default-bundle"} {
		if c.IsSet(f) {
			return f
		}
	}
	return ""
}

// hookRequest is the request the rewritten `proxy exec --shell` for cmd
// makes.
func hookRequest(e *env, cmd hooks.Command) runner.Request {
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = runner.DefaultTimeout
	}
	// The request the rewritten `proxy exec --shell` makes: its argv is
	// the empty list, not nil (the approval's digest tells them apart).
	name := cmd.Vault
	if name == "" {
		name = e.vaultName()
	}
	return runner.Request{Vault: name, Argv: []string{}, Shell: cmd.Script, Cwd: cmd.Cwd, Timeout: timeout, ApprovalTTL: runner.DefaultTTL, Source: wire.SourceHook}
}

// forwardPrecheck decides a command of a workspace through the avfs that
// serves it (POST /v1/precheck on cmd.Server): only that avfs decides, its
// view showing the vault at the project directory; one that does not
// answer is an error (the call is blocked), never a decision made here.
func forwardPrecheck(e *env) func(ctx context.Context, cmd hooks.Command) (hooks.Verdict, error) {
	return func(ctx context.Context, cmd hooks.Command) (hooks.Verdict, error) {
		res, ok, note, err := serverPrecheck(ctx, cmd.Server, hookRequest(e, cmd))
		if err != nil {
			return hooks.Verdict{}, err
		}
		if !ok {
			return hooks.Verdict{}, fmt.Errorf("the workspace's avfs did not decide: %s", note)
		}
		return verdictOf(res), nil
	}
}

// hookWorkspace finds the workspace (avfs workspace up) a hook's directory
// is in, with the socket of the avfs serving it while it is up.
func hookWorkspace(reg workspace.Registry) func(dir string) (*hooks.Workspace, error) {
	return func(dir string) (*hooks.Workspace, error) {
		b, ok, err := reg.Find(dir)
		if err != nil || !ok {
			return nil, err
		}
		ws := &hooks.Workspace{Dir: b.Dir, Vault: b.Vault}
		l, err := reg.Live(b.Dir)
		if err != nil {
			return nil, err
		}
		if l != nil {
			ws.Server = l.Socket
		}
		return ws, nil
	}
}

func hookInstallCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "install",
		Usage: "register avfs's hook in a harness's settings (merged, idempotent)",
		UsageText: "avfs [--vault NAME] hook install claude-code|codex|gemini [--project DIR [--workspace] | --user] [--headless] [--dry-run]\n" +
			"   avfs [--vault NAME] hook install claude-code --http http://HOST:PORT [--token-env VAR] [--project DIR | --user] [--headless]",
		Description: `Adds avfs's hook to .claude/settings.json (PreToolUse, PostToolUse and
PermissionRequest on Bash), .codex/hooks.json (PreToolUse and PermissionRequest
on Bash) or .gemini/settings.json (BeforeTool on run_shell_command), in the
project directory (default: the current one) or, with --user, in your home.
Other settings and hooks are kept; running it again changes nothing. A
settings file that is not valid JSON is refused, never overwritten. The hook
runs this avfs binary, with --vault when given.

With --http (Claude Code only), the hooks are Claude Code's HTTP hooks posting
to the avfs serve at that address (POST /v1/hooks/claude-code, with --vault,
the project directory and --headless in the query) with the bearer token of
$AVFS_TOKEN (--token-env). They fail open when the daemon is down: where the
hook must block, use the command hook with --server. See docs/integrations.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "project", Value: ".", Usage: "install in the project `DIR`"},
			&cli.BoolFlag{Name: "user", Usage: "install in your home's settings instead of a project's"},
			&cli.BoolFlag{Name: "headless", Usage: "claude-code: the hook answers require_approval with defer (for claude -p)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the settings file as it would be written; write nothing"},
			&cli.StringFlag{Name: "http", Usage: "claude-code: HTTP hooks posting to the avfs serve at `URL` (http://HOST:PORT) instead of command hooks"},
			&cli.BoolFlag{Name: "workspace", Usage: "also make the project directory its vault, mounted there (avfs workspace up DIR), so that the harness's file tools and the commands avfs runs see one tree at one path"},
			&cli.StringFlag{Name: "token-env", Value: "AVFS_TOKEN", Usage: "with --http: the `VARIABLE` of Claude Code's environment holding the daemon's token"},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "HARNESS")
			if err != nil {
				return err
			}
			h := hooks.Harness(a[0])
			if c.IsSet("project") && c.Bool("user") {
				return usageError("hook install: give --project or --user, not both")
			}
			if c.Bool("headless") && h != hooks.ClaudeCode {
				return usageError("hook install: --headless is for claude-code only")
			}
			dir, err := filepath.Abs(c.String("project"))
			if err != nil {
				return err
			}
			if c.Bool("user") {
				if dir, err = os.UserHomeDir(); err != nil {
					return wire.Errorf(wire.CodeInvalidInput, "hook install --user: no home directory: %v", err)
				}
			}
			path, err := hooks.SettingsPath(h, dir)
			if err != nil {
				return err
			}
			var ws *wire.WorkspaceStatus
			if c.Bool("workspace") {
				if c.Bool("user") {
					return usageError("hook install: --workspace is for a project (--project DIR), not --user")
				}
				if !c.Bool("dry-run") {
					// First, so that the settings are written through the
					// mount: the vault holds them like every other file.
					st, err := runWorkspaceUp(c.Context, e, dir)
					if err != nil {
						return err
					}
					ws = &st
				}
			}
			var res hooks.InstallResult
			if u := c.String("http"); u != "" {
				if h != hooks.ClaudeCode {
					return usageError("hook install: --http is for claude-code only (%s has command hooks only)", h)
				}
				q := url.Values{}
				if e.vault != "" {
					q.Set("vault", e.vault)
				}
				if !c.Bool("user") {
					q.Set("project", dir)
				}
				if c.Bool("headless") {
					q.Set("headless", "1")
				}
				hook, err := hooks.HTTPHook(u, c.String("token-env"), q)
				if err != nil {
					return err
				}
				if res, err = hooks.InstallHook(h, path, hook, c.Bool("dry-run")); err != nil {
					return err
				}
			} else {
				exe, err := os.Executable()
				if err != nil {
					return wire.Errorf(wire.CodeInternal, "hook install: where is avfs: %v", err)
				}
				parts := []string{hooks.Quote(exe)}
				if e.vault != "" {
					parts = append(parts, "--vault", hooks.Quote(e.vault))
				}
				parts = append(parts, "hook", string(h))
				if c.Bool("headless") {
					parts = append(parts, "--headless")
				}
				if res, err = hooks.Install(h, path, strings.Join(parts, " "), c.Bool("dry-run")); err != nil {
					return err
				}
			}
			res.Workspace = ws
			return e.emit(res, func(w io.Writer) error {
				if ws != nil {
					if err := printWorkspace(w, *ws); err != nil {
						return err
					}
				}
				switch {
				case !res.Changed:
					fmt.Fprintf(w, "avfs's %s hook is already in %s: nothing to do\n", h, path)
				case res.DryRun:
					fmt.Fprintf(w, "would write %s:\n%s\n", path, res.Settings)
				default:
					fmt.Fprintf(w, "added avfs's %s hook to %s\n", h, path)
				}
				return nil
			})
		},
	}
}
