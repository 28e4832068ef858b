package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/mount"
	"avfs/runner"
	"avfs/server"
	"avfs/vault"
	"avfs/wire"
	"avfs/workspace"
)

// workspaceDownWait bounds how long `workspace down` waits, once the
// directory is unmounted, for the workspace's avfs to finish its runs and
// end.
const workspaceDownWait = 30 * time.Second

func workspaceCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "workspace",
		Usage: "make a project directory its vault: mounted at the same path (docs/integrations.md)",
		Description: `"avfs workspace up DIR" imports DIR into a vault on first use and mounts the
vault at DIR itself, served by an avfs in the background. An agent harness's
own file tools then write through the mount (audited, quota'd, checkpointed),
and commands run through avfs (proxy exec, hooks, MCP) work in the same
directory: in a sandbox the vault is shown at DIR, not at /workspace, so every
absolute path means the same inside and out. proxy exec and checkpoint restore
of that vault go through the workspace's avfs by themselves.
"avfs workspace down DIR" unmounts it; --export writes the vault back into DIR.`,
		Subcommands: []*cli.Command{
			{
				Name:      "up",
				Usage:     "mount the project directory as its vault (importing it on first use)",
				UsageText: "avfs [--vault NAME] workspace up [DIR]\n\nexample: avfs workspace up ~/src/app",
				Action: func(c *cli.Context) error {
					dir, err := workspaceDirArg(c)
					if err != nil {
						return err
					}
					st, err := runWorkspaceUp(c.Context, e, dir)
					if err != nil {
						return err
					}
					return e.emit(st, func(w io.Writer) error { return printWorkspace(w, st) })
				},
			},
			{
				Name:      "down",
				Usage:     "unmount a workspace (and, with --export, write the vault back into the directory)",
				UsageText: "avfs workspace down [DIR] [--export] [--forget] [--lazy]\n\nexample: avfs workspace down ~/src/app --export",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "export", Usage: "make DIR hold what the vault holds once unmounted (files written back, files the vault no longer has removed)"},
					&cli.BoolFlag{Name: "forget", Usage: "remove the binding: DIR is no longer the vault's (the vault is kept)"},
					&cli.BoolFlag{Name: "lazy", Usage: "detach a mount still in use (it goes when its users let go)"},
				},
				Action: func(c *cli.Context) error {
					dir, err := workspaceDirArg(c)
					if err != nil {
						return err
					}
					st, err := runWorkspaceDown(c.Context, e, workspaceDownOptions{dir: dir, export: c.Bool("export"), forget: c.Bool("forget"), lazy: c.Bool("lazy")})
					if err != nil {
						return err
					}
					return e.emit(st, func(w io.Writer) error { return printWorkspace(w, st) })
				},
			},
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list the workspaces, up or down",
				UsageText: "avfs workspace list",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					list, err := workspaceList(workspace.Registry{Home: e.home})
					if err != nil {
						return err
					}
					return e.emit(list, func(w io.Writer) error {
						if len(list.Workspaces) == 0 {
							_, err := fmt.Fprintln(w, "no workspaces")
							return err
						}
						for _, st := range list.Workspaces {
							if err := printWorkspace(w, st); err != nil {
								return err
							}
						}
						return nil
					})
				},
			},
			{
				Name:      "serve",
				Usage:     "serve a workspace in the foreground (what `workspace up` starts)",
				UsageText: "avfs [--vault NAME] workspace serve DIR",
				Hidden:    true,
				Flags:     bundleFlags(),
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "DIR")
					if err != nil {
						return err
					}
					return runWorkspaceServe(c, e, a[0])
				},
			},
		},
	}
}

// workspaceDirArg is the command's DIR argument, "." when none.
func workspaceDirArg(c *cli.Context) (string, error) {
	a, err := args(c, 0, 1, "[DIR]")
	if err != nil {
		return "", err
	}
	if len(a) == 0 {
		return ".", nil
	}
	return a[0], nil
}

func printWorkspace(w io.Writer, st wire.WorkspaceStatus) error {
	var b strings.Builder
	switch {
	case st.State == wire.WorkspaceUp && st.Already:
		fmt.Fprintf(&b, "%s is up already: vault %s, served by pid %d", st.Dir, st.Vault, st.PID)
	case st.State == wire.WorkspaceUp:
		fmt.Fprintf(&b, "%s is vault %s, mounted there (pid %d)", st.Dir, st.Vault, st.PID)
	case st.Already:
		fmt.Fprintf(&b, "%s is down already (vault %s)", st.Dir, st.Vault)
	default:
		fmt.Fprintf(&b, "%s is down (vault %s)", st.Dir, st.Vault)
	}
	if i := st.Imported; i != nil {
		fmt.Fprintf(&b, "; imported %d files, %d directories, %d bytes", i.Files, i.Dirs, i.Bytes)
	}
	if x := st.Exported; x != nil {
		fmt.Fprintf(&b, "; exported %d files, %d directories, %d bytes", x.Files, x.Dirs, x.Bytes)
	}
	if st.Removed != nil {
		fmt.Fprintf(&b, "; removed %d host entries the vault no longer has", *st.Removed)
	}
	if st.Forgotten {
		b.WriteString("; forgotten: the directory is no longer the vault's")
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}

// workspaceDir is DIR made absolute and real, checked to be fit for a
// workspace.
func workspaceDir(e *env, arg string) (string, error) {
	dir, err := workspace.Clean(arg)
	if err != nil {
		return "", err
	}
	home, _ := os.UserHomeDir()
	return dir, workspace.Check(dir, home, e.home)
}

func upStatus(l *workspace.Live) wire.WorkspaceStatus {
	at := l.StartedAt.UTC()
	return wire.WorkspaceStatus{Kind: wire.WorkspaceKind, Dir: l.Dir, Vault: l.Vault, State: wire.WorkspaceUp, PID: l.PID, Socket: l.Socket, StartedAt: &at}
}

func transferCount(t vault.TransferResult) *wire.TransferCount {
	return &wire.TransferCount{Files: t.Files, Dirs: t.Dirs, Symlinks: t.Symlinks, Special: t.Special, Bytes: t.Bytes}
}

// runWorkspaceUp starts the avfs that serves the workspace at dir (avfs
// workspace serve, in its own session, its log in the run directory) and
// waits until it is ready or has failed. A workspace that is up already is
// reported as such. The vault is --vault, else the one dir is bound to,
// else a new one named after dir.
func runWorkspaceUp(ctx context.Context, e *env, arg string) (wire.WorkspaceStatus, error) {
	dir, err := workspaceDir(e, arg)
	if err != nil {
		return wire.WorkspaceStatus{}, err
	}
	reg := workspace.Registry{Home: e.home}
	if l, err := reg.Live(dir); err != nil || l != nil {
		if l == nil {
			return wire.WorkspaceStatus{}, err
		}
		if e.vault != "" && e.vault != l.Vault {
			return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeAlreadyExists, "workspace up: %s is up as vault %s, not %s", dir, l.Vault, e.vault).With("dir", dir)
		}
		st := upStatus(l)
		st.Already = true
		return st, nil
	}
	name := e.vault
	if b, ok, err := reg.Binding(dir); err != nil {
		return wire.WorkspaceStatus{}, err
	} else if ok {
		if name != "" && name != b.Vault {
			return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeAlreadyExists, "workspace up: %s is bound to vault %s, not %s (avfs workspace down %s --forget first)", dir, b.Vault, name, dir).
				With("dir", dir).With("vault", b.Vault)
		}
		name = b.Vault
	}
	if name == "" {
		name = workspace.VaultName(dir)
	}
	if err := vault.ValidName(name); err != nil {
		return wire.WorkspaceStatus{}, err
	}
	if _, err := runner.OpenRunDir(e.home + "/run"); err != nil {
		return wire.WorkspaceStatus{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeInternal, "workspace up: where is avfs: %v", err)
	}
	logf, err := os.OpenFile(reg.Log(dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		// The run directory exists (OpenRunDir); the workspaces one may not yet.
		if err := os.MkdirAll(e.home+"/run/workspaces", 0o700); err != nil {
			return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeHostIO, "workspace up: %v", err)
		}
		if logf, err = os.OpenFile(reg.Log(dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600); err != nil {
			return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeHostIO, "workspace up: log: %v", err)
		}
	}
	defer logf.Close()
	cmd := exec.Command(exe, "--vault", name, "--json", "workspace", "serve", dir)
	cmd.Dir = "/" // never on the mount it is about to serve
	cmd.Env = append(os.Environ(), "AVFS_HOME="+e.home)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeInternal, "workspace up: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeInternal, "workspace up: start avfs: %v", err)
	}
	var raw json.RawMessage
	derr := json.NewDecoder(out).Decode(&raw)
	var st wire.WorkspaceStatus
	if derr == nil && json.Unmarshal(raw, &st) == nil && st.Kind == wire.WorkspaceKind {
		go cmd.Wait() // it lives on; up only reaps it if it ends while up still runs
		_ = cmd.Process.Release()
		return st, nil
	}
	werr := cmd.Wait()
	if derr == nil {
		var doc wire.ErrorDocument
		if json.Unmarshal(raw, &doc) == nil && doc.Error != nil {
			return wire.WorkspaceStatus{}, errorFromDocument(doc, "workspace up")
		}
	}
	return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeInternal, "workspace up: the avfs serving %s ended before it was ready (%v); its log is %s", dir, werr, reg.Log(dir)).With("log", reg.Log(dir))
}

// errorFromDocument is the error an avfs error document describes.
func errorFromDocument(doc wire.ErrorDocument, what string) error {
	code, _ := doc.Error["code"].(string)
	msg, _ := doc.Error["message"].(string)
	err := wire.Errorf(wire.Code(code), "%s: %s", what, strings.TrimPrefix(msg, what+": "))
	for k, v := range doc.Error {
		if k != "code" && k != "message" {
			err = err.With(k, v)
		}
	}
	return err
}

// runWorkspaceServe serves the workspace at arg until it is unmounted
// (`avfs workspace down`, or an unmount from outside) or avfs is told to
// stop (SIGTERM, SIGINT): the vault mounted at the directory, and the
// serve API on the workspace's socket, whose runs work in that mount. It
// prints one JSON line, the workspace's status, once both are ready; an
// error before then is avfs's error document (nothing is left mounted).
func runWorkspaceServe(c *cli.Context, e *env, arg string) error {
	ctx := c.Context
	dir, err := workspaceDir(e, arg)
	if err != nil {
		return err
	}
	reg := workspace.Registry{Home: e.home}
	claim, err := reg.Claim(dir)
	if err != nil {
		return err
	}
	defer claim.Release()
	name := e.vault
	if name == "" {
		if b, ok, err := reg.Binding(dir); err != nil {
			return err
		} else if ok {
			name = b.Vault
		} else {
			name = workspace.VaultName(dir)
		}
	}
	if _, err := reg.Bind(dir, name, time.Now()); err != nil {
		return err
	}
	store, err := e.store()
	if err != nil {
		return err
	}
	v, err := store.Open(ctx, name)
	var imported *wire.TransferCount
	if wire.HasCode(err, wire.CodeVaultNotFound) {
		// First use: the directory's files become the vault's.
		if v, err = store.Create(ctx, name); err != nil {
			return err
		}
		res, ierr := v.Import(ctx, dir, "/")
		if ierr != nil {
			v.Close()
			_ = store.Delete(context.WithoutCancel(ctx), name, true)
			_ = reg.Unbind(dir)
			return fmt.Errorf("workspace: import %s: %w", dir, ierr)
		}
		imported = transferCount(res)
	} else if err != nil {
		return err
	}
	defer v.Close()
	serveProcs()
	sess, err := mount.Mount(ctx, v, dir, mount.Options{FsName: "avfs:" + name, SpillDir: e.home + "/run/workspaces"})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = sess.Unmount(true)
		}
	}()
	attached := &runner.Attached{Vault: name, Dir: dir, Session: sess}
	sp, err := e.startServePolicy(c)
	if err != nil {
		return err
	}
	load := e.serveLoader(c, sp)
	logger := log.New(e.stderr, "avfs workspace "+dir+": ", log.LstdFlags)
	srv, err := server.New(ctx, server.Config{Managed: sp.managed(),
		Load: func(ctx context.Context) (*runner.Runner, []string, error) {
			r, watch, err := load(ctx)
			if r != nil {
				r.Attached = attached
			}
			return r, watch, err
		},
		Poll: server.DefaultPoll, Grace: server.DefaultGrace, Version: version, Log: logger})
	if err != nil {
		return err
	}
	if sp != nil {
		sp.attach(srv)
	}
	ln, err := server.Listen("unix:" + reg.Socket(dir))
	if err != nil {
		return err
	}
	defer ln.Close()
	started := time.Now()
	live := workspace.Live{Dir: dir, Vault: name, PID: os.Getpid(), StartedAt: started.UTC(), Socket: reg.Socket(dir)}
	if err := claim.Publish(live); err != nil {
		return err
	}
	st := upStatus(&live)
	st.Imported = imported
	e.printed = true
	if err := json.NewEncoder(e.stdout).Encode(st); err != nil {
		return err
	}
	logger.Printf("vault %s mounted; serving on %s (pid %d)", name, reg.Socket(dir), os.Getpid())
	// Serve until the mount goes (down, or an unmount from outside) or a
	// signal comes.
	serveCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-sess.Done():
			cancel(errors.New("unmounted"))
		case <-serveCtx.Done():
		}
	}()
	serr := srv.Serve(serveCtx, ln)
	// Runs have ended. A mount still there (a signal) goes now; one still
	// in use is detached and served until its users let go.
	if sess.State() == mount.StateMounted {
		if err := sess.Unmount(false); err != nil {
			logger.Printf("unmount: %v: detaching it; serving until it is let go", err)
			_ = sess.Unmount(true)
		}
	}
	sess.Wait()
	stopped = true
	logger.Printf("unmounted")
	return serr
}

type workspaceDownOptions struct {
	dir                  string
	export, forget, lazy bool
}

// runWorkspaceDown unmounts the workspace at o.dir and waits for its avfs
// to end (its runs finish first), then, with o.export, mirrors the vault
// into the directory and, with o.forget, removes the binding. A mount in
// use fails with mount_busy naming its users, unless o.lazy.
func runWorkspaceDown(ctx context.Context, e *env, o workspaceDownOptions) (wire.WorkspaceStatus, error) {
	dir, err := workspace.Clean(o.dir)
	if err != nil {
		return wire.WorkspaceStatus{}, err
	}
	reg := workspace.Registry{Home: e.home}
	b, bound, err := reg.Binding(dir)
	if err != nil {
		return wire.WorkspaceStatus{}, err
	}
	if !bound {
		return wire.WorkspaceStatus{}, wire.Errorf(wire.CodeNotFound, "workspace down: %s is not a workspace", dir).With("dir", dir)
	}
	st := wire.WorkspaceStatus{Kind: wire.WorkspaceKind, Dir: dir, Vault: b.Vault, State: wire.WorkspaceDown}
	l, err := reg.Live(dir)
	if err != nil {
		return st, err
	}
	if l == nil {
		st.Already = true
		if err := mount.CleanStale(dir); err != nil { // its avfs was killed: the dead mount goes
			return st, err
		}
	} else {
		if err := mount.Unmount(dir, o.lazy); err != nil && !wire.HasCode(err, wire.CodeNotMounted) {
			if wire.HasCode(err, wire.CodeMountBusy) {
				return st, fmt.Errorf("workspace down: %w (end them, or give --lazy)", err)
			}
			return st, fmt.Errorf("workspace down: %w", err)
		}
		deadline := time.Now().Add(workspaceDownWait)
		for {
			l, err := reg.Live(dir)
			if err != nil {
				return st, err
			}
			if l == nil {
				break
			}
			if time.Now().After(deadline) {
				return st, wire.Errorf(wire.CodeVaultBusy, "workspace down: %s is unmounted, but its avfs (pid %d) is still finishing runs after %s", dir, l.PID, workspaceDownWait).With("holder_pid", l.PID)
			}
			select {
			case <-ctx.Done():
				return st, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if o.export {
		if mount.IsMounted(dir) {
			return st, wire.Errorf(wire.CodeMountBusy, "workspace down --export: %s is still mounted (detached and in use): nothing exported", dir).With("dir", dir)
		}
		v, err := e.readStore().Open(ctx, b.Vault)
		if err != nil {
			return st, err
		}
		defer v.Close()
		res, removed, err := workspace.Mirror(ctx, v, dir)
		if err != nil {
			return st, fmt.Errorf("workspace down --export: %w", err)
		}
		st.Exported, st.Removed, st.Already = transferCount(res), &removed, false
	}
	if o.forget {
		if err := reg.Unbind(dir); err != nil {
			return st, err
		}
		st.Forgotten, st.Already = true, false
	}
	return st, nil
}

// workspaceList lists the bindings with their state.
func workspaceList(reg workspace.Registry) (wire.WorkspaceList, error) {
	bs, err := reg.Bindings()
	if err != nil {
		return wire.WorkspaceList{}, err
	}
	out := wire.WorkspaceList{Kind: wire.WorkspaceListKind, Workspaces: []wire.WorkspaceStatus{}}
	for _, b := range bs {
		l, err := reg.Live(b.Dir)
		if err != nil {
			return out, err
		}
		if l != nil {
			out.Workspaces = append(out.Workspaces, upStatus(l))
			continue
		}
		out.Workspaces = append(out.Workspaces, wire.WorkspaceStatus{Kind: wire.WorkspaceKind, Dir: b.Dir, Vault: b.Vault, State: wire.WorkspaceDown})
	}
	return out, nil
}

// restore returns the vault name to checkpoint ref: through the avfs that
// serves it as a workspace when one does (it alone may change the vault it
// keeps mounted, and makes the mount forget what it cached), else here.
func (e *env) restore(ctx context.Context, name, ref string) (vault.RestoreResult, error) {
	ws, err := workspace.Registry{Home: e.home}.ForVault(name)
	if err != nil {
		return vault.RestoreResult{}, err
	}
	if ws != nil {
		return serverRestore(ctx, ws.Socket, wire.RestoreRequest{Vault: name, Checkpoint: ref})
	}
	s, err := e.store()
	if err != nil {
		return vault.RestoreResult{}, err
	}
	v, err := s.OpenOrCreate(ctx, name)
	if err != nil {
		return vault.RestoreResult{}, err
	}
	defer v.Close()
	p := e.progress("restore", "files")
	defer p.finish()
	res, err := v.RestoreCheckpointWith(ctx, ref, vault.RestoreOptions{Progress: p.report()})
	if res.Changes == nil {
		res.Changes = []vault.Change{}
	}
	return res, err
}

// forwardToWorkspace runs req through the avfs serving the workspace of
// its vault, when there is one (ok false otherwise): that avfs alone may
// change the vault it keeps mounted. One that does not take the run is an
// envelope of vault_busy, as for proxy exec.
func (e *env) forwardToWorkspace(ctx context.Context, req runner.Request) (*wire.Envelope, bool) {
	ws, err := workspace.Registry{Home: e.home}.ForVault(req.Vault)
	if err != nil || ws == nil {
		return nil, false
	}
	if req.Stdin != nil || req.Stdout != nil || req.Stderr != nil {
		env, _ := runner.Failed(req, time.Now(), wire.Errorf(wire.CodeVaultBusy,
			"proxy exec: the vault %s is the workspace at %s, served by pid %d: a run with input or streamed output cannot go through it", ws.Vault, ws.Dir, ws.PID).
			With("holder_pid", ws.PID).With("dir", ws.Dir))
		return env, true
	}
	env, _, note := postExec(ctx, ws.Socket, req)
	if note != "" {
		env, _ = runner.Failed(req, time.Now(), wire.Errorf(wire.CodeVaultBusy,
			"proxy exec: the vault %s is the workspace at %s, served by pid %d, which did not take the run: %s", ws.Vault, ws.Dir, ws.PID, note).
			With("holder_pid", ws.PID).With("dir", ws.Dir))
	}
	return env, true
}
