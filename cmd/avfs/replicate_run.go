//go:build avfs_replicator

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"avfs/replicate"
	"avfs/vault"
	"avfs/wire"
)

// s3Credentials is the content of replication.s3.credentials_file.
type s3Credentials struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
}

// replicaTarget is url with how to reach it, from the config.
func (e *env) replicaTarget(url string) (replicate.Target, error) {
	u, err := replicate.CheckURL(url)
	if err != nil {
		return replicate.Target{}, err
	}
	cfg, err := loadConfig(e.home)
	if err != nil {
		return replicate.Target{}, err
	}
	c := cfg.Replication.S3
	t := replicate.Target{URL: u, S3: replicate.S3{Endpoint: c.Endpoint, Region: c.Region, ForcePathStyle: c.ForcePathStyle}}
	if f := c.CredentialsFile; f != "" {
		bad := func(format string, a ...any) error {
			return wire.Errorf(wire.CodeInvalidInput, "config: replication.s3.credentials_file %s: "+format, append([]any{f}, a...)...).With("path", f)
		}
		fi, err := os.Stat(f)
		if err != nil {
			return t, bad("%v", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return t, bad("readable by others (mode %04o): chmod 600 it", fi.Mode().Perm())
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return t, bad("%v", err)
		}
		var cr s3Credentials
		if err := json.Unmarshal(b, &cr); err != nil || cr.AccessKeyID == "" || cr.SecretAccessKey == "" {
			return t, bad("want {\"access_key_id\": …, \"secret_access_key\": …}")
		}
		t.S3.AccessKeyID, t.S3.SecretAccessKey = cr.AccessKeyID, cr.SecretAccessKey
	}
	return t, nil
}

// runReplicate turns replication on or off, runs the replicator in the
// foreground, or reports. The foreground replicator never opens the vault
// through package vault in this process (package replicate says why):
// the fork check of --to closes the vault before it starts.
func runReplicate(ctx context.Context, e *env, opts replicateOpts) (wire.VaultReplica, error) {
	out := wire.VaultReplica{Kind: wire.VaultReplicaKind, Vault: opts.name}
	caBundleForLitestream()
	s, err := e.store()
	if err != nil {
		return out, err
	}
	if err := vault.ValidName(opts.name); err != nil {
		return out, err
	}
	path := s.PathOf(opts.name)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return out, wire.Errorf(wire.CodeVaultNotFound, "replicate: no vault %q", opts.name).With("vault", opts.name)
	}
	if opts.stop {
		return out, stopReplicating(ctx, s, opts.name)
	}
	mark, marked, err := vault.ReadReplicaMark(path)
	if err != nil {
		return out, err
	}
	if opts.to != "" {
		url, err := replicate.CheckURL(opts.to)
		if err != nil {
			return out, err
		}
		if marked && mark.URL != url {
			return out, wire.Errorf(wire.CodeAlreadyExists, "replicate: vault %q already replicates to %s: `avfs vault replicate %s --stop` first", opts.name, mark.URL, opts.name).
				With("vault", opts.name).With("url", mark.URL)
		}
		if err := replicable(ctx, s, opts.name); err != nil {
			return out, err
		}
		t, err := e.replicaTarget(url)
		if err != nil {
			return out, err
		}
		// Reach the replica before marking: a bad bucket or credentials
		// fail here, and the vault keeps its checkpoints.
		if _, err := replicate.Latest(ctx, t); err != nil {
			return out, err
		}
		if !marked {
			if mark, err = s.SetReplicaMark(ctx, opts.name, url); err != nil {
				return out, err
			}
			marked = true
		}
	}
	if !marked {
		if opts.foreground {
			return out, wire.Errorf(wire.CodeInvalidInput, "replicate: vault %q has no replica: give --to URL", opts.name).With("vault", opts.name)
		}
		return out, nil
	}
	out.Replicated, out.URL = true, mark.URL
	since := mark.Since
	out.Since = &since
	t, err := e.replicaTarget(mark.URL)
	if err != nil {
		return out, err
	}
	if opts.foreground {
		if err := replicateForeground(ctx, e, s, opts.name, t); err != nil {
			return out, err
		}
	}
	p, err := replicate.Latest(ctx, t)
	if err != nil {
		return out, err
	}
	out.Position = position(p)
	return out, nil
}

func position(p replicate.Position) *wire.ReplicaPosition {
	out := &wire.ReplicaPosition{TXID: p.TXID}
	if !p.UpdatedAt.IsZero() {
		u := p.UpdatedAt.UTC()
		out.UpdatedAt = &u
	}
	return out
}

// replicable refuses a fork: it borrows its parent's data, which its
// replica would not hold. The vault is closed again before returning.
func replicable(ctx context.Context, s *vault.Store, name string) error {
	v, err := s.Open(ctx, name)
	if err != nil {
		return err
	}
	info, err := v.Info(ctx)
	v.Close()
	if err != nil {
		return err
	}
	if info.Parent != nil {
		return wire.Errorf(wire.CodeInvalidInput, "replicate: vault %q is a fork of %q and borrows its data: `avfs vault detach %s` first", name, info.Parent.Name, name).With("vault", name)
	}
	return nil
}

// replicatorLock takes the vault's replicator lock (one replicator per
// vault), without waiting: vault_busy when another holds it.
func replicatorLock(s *vault.Store, name string) (*os.File, error) {
	p := vault.ReplicatorLockPath(s.PathOf(name))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "replicate: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, wire.Errorf(wire.CodeVaultBusy, "replicate: another replicator runs for vault %q (avfs serve, or a --foreground one)", name).With("vault", name)
	}
	return f, nil
}

// replicateForeground runs the replicator until ctx is done or the mark
// is removed or changed (--stop elsewhere).
func replicateForeground(ctx context.Context, e *env, s *vault.Store, name string, t replicate.Target) error {
	lock, err := replicatorLock(s, name)
	if err != nil {
		return err
	}
	defer lock.Close()
	path := s.PathOf(name)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // stop when the mark goes or points elsewhere
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if m, ok, err := vault.ReadReplicaMark(path); err == nil && (!ok || m.URL != t.URL) {
					cancel()
					return
				}
			}
		}
	}()
	return replicate.Run(ctx, path, t, replicate.RunOptions{Logger: quietLitestream(e), Ready: func() {
		fmt.Fprintf(e.stderr, "avfs: replicating vault %s to %s (pid %d); SIGINT or SIGTERM stops\n", name, t.URL, os.Getpid())
	}})
}

// stopReplicating removes the mark, waits for the replicator to notice
// and ship what it has (it holds its lock until then: at most its final
// sync's 30 s), and removes its local state.
func stopReplicating(ctx context.Context, s *vault.Store, name string) error {
	if err := s.ClearReplicaMark(ctx, name); err != nil {
		return err
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		lock, err := replicatorLock(s, name)
		if err == nil {
			err = s.RemoveReplicaState(name)
			lock.Close()
			return err
		}
		if !wire.HasCode(err, wire.CodeVaultBusy) || time.Now().After(deadline) {
			return fmt.Errorf("%w (the mark is removed: avfs checkpoints the vault again; run --stop again to clean up)", err)
		}
		select {
		case <-ctx.Done():
			return wire.Errorf(wire.CodeInternal, "stop replicating: %v", context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// caBundleForLitestream hands AWS_CA_BUNDLE to Go's TLS roots. Litestream's
// S3 client brings its own HTTP transport, which the AWS SDK refuses to
// combine with AWS_CA_BUNDLE ("unable to add custom RootCAs"); with the
// bundle as SSL_CERT_FILE (unless one is set) the transport trusts it
// all the same. It changes this process's environment: replication
// commands call it first.
func caBundleForLitestream() {
	b := os.Getenv("AWS_CA_BUNDLE")
	if b == "" {
		return
	}
	if os.Getenv("SSL_CERT_FILE") == "" {
		os.Setenv("SSL_CERT_FILE", b)
	}
	os.Unsetenv("AWS_CA_BUNDLE")
}

// quietLitestream sends Litestream's messages, warnings and errors only,
// to stderr, as those of its parts that log to slog's default logger
// (a restore's) do.
func quietLitestream(e *env) *slog.Logger {
	l := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	slog.SetDefault(l)
	return l
}

// runRestore restores the replica into a new file in the vaults
// directory and adopts it as the vault opts.name. Litestream writes and
// closes the file before package vault opens it (one SQLite at a time on
// a file: package replicate).
//
// The restore makes no audit key: the vault's audit rows carry MACs under
// the key of the installation that wrote them, which `vault check` and
// `audit verify` check only with that key (copy $AVFS_HOME/keys/audit.key
// along), and skip without one.
func runRestore(ctx context.Context, e *env, opts restoreOpts) (wire.VaultRestore, error) {
	out := wire.VaultRestore{Kind: wire.VaultRestoreKind}
	caBundleForLitestream()
	key, err := e.auditKey(false)
	if err != nil {
		return out, err
	}
	s := vault.NewStore(e.home, vault.Options{Actor: "cli:" + cliUser(), AuditKey: key})
	quietLitestream(e)
	if err := vault.ValidName(opts.name); err != nil {
		return out, err
	}
	if _, err := os.Lstat(s.PathOf(opts.name)); err == nil && !opts.force {
		return out, wire.Errorf(wire.CodeAlreadyExists, "vault restore: a vault %q exists; restore under another name, or --force to replace it", opts.name).With("vault", opts.name)
	}
	t, err := e.replicaTarget(opts.from)
	if err != nil {
		return out, err
	}
	out.From = t.URL
	tmp, err := s.RestoreTemp(opts.name)
	if err != nil {
		return out, err
	}
	defer vault.RemoveTemp(tmp)
	p, err := replicate.Restore(ctx, t, tmp, opts.timestamp)
	if err != nil {
		return out, err
	}
	out.Position = *position(p)
	if !opts.timestamp.IsZero() {
		ts := opts.timestamp.UTC()
		out.Timestamp = &ts
	}
	if out.Vault, err = s.AdoptRestored(ctx, opts.name, tmp, opts.force); err != nil {
		return out, err
	}
	return out, nil
}

// replicateAction runs `vault replicate` and prints its result.
func (e *env) replicateAction(ctx context.Context, opts replicateOpts) error {
	out, err := runReplicate(ctx, e, opts)
	if err != nil {
		return err
	}
	return e.emit(out, func(w io.Writer) error {
		if opts.to != "" && !opts.foreground {
			fmt.Fprintf(e.stderr, "avfs: avfs serve replicates it (it looks every --poll); without serve: avfs vault replicate %s --foreground\n", out.Vault)
		}
		switch {
		case !out.Replicated:
			_, err := fmt.Fprintf(w, "vault %s is not replicated\n", out.Vault)
			return err
		case out.Position == nil || out.Position.UpdatedAt == nil:
			_, err := fmt.Fprintf(w, "vault %s replicates to %s (since %s); the replica holds nothing yet\n", out.Vault, out.URL, out.Since.Format(time.RFC3339))
			return err
		default:
			_, err := fmt.Fprintf(w, "vault %s replicates to %s (since %s); the replica is at transaction %d of %s\n",
				out.Vault, out.URL, out.Since.Format(time.RFC3339), out.Position.TXID, out.Position.UpdatedAt.Format(time.RFC3339Nano))
			return err
		}
	})
}

// restoreAction runs `vault restore` and prints its result.
func (e *env) restoreAction(ctx context.Context, opts restoreOpts) error {
	out, err := runRestore(ctx, e, opts)
	if err != nil {
		return err
	}
	return e.emit(out, func(w io.Writer) error {
		at := "its latest state"
		if out.Timestamp != nil {
			at = "its state at " + out.Timestamp.Format(time.RFC3339Nano)
		}
		_, err := fmt.Fprintf(w, "restored vault %s (%d files, %s) from %s, %s (replica transaction %d)\n",
			out.Vault.Name, out.Vault.Files, humanSize(out.Vault.Bytes), out.From, at, out.Position.TXID)
		return err
	})
}
