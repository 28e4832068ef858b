package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/replicate/supervisor"
	"avfs/vault"
	"avfs/wire"
)

// Replication (docs/replication.md) runs in avfs-replicate: avfs built
// with the avfs_replicator tag, which links Litestream (and through it
// the AWS SDK and a second SQLite, modernc.org/sqlite). avfs itself does
// not link it: it would cost every avfs process at start (0.8 MB more of
// package initialisation, a third more page faults, docs/replication.md),
// replicating or not. This avfs hands `vault replicate` and `vault
// restore` to avfs-replicate (replicate_delegate.go), which runs them
// (replicate_run.go); avfs serve starts avfs-replicate for each
// replicated vault.

// replicatorPath is avfs-replicate: $AVFS_REPLICATOR, else beside the
// avfs executable exe.
func replicatorPath(exe string) string {
	if p := os.Getenv("AVFS_REPLICATOR"); p != "" {
		return p
	}
	return filepath.Join(filepath.Dir(exe), "avfs-replicate")
}

// replicationConfig is the config's "replication" section: how avfs
// reaches S3 replicas (docs/replication.md). Replica URLs themselves are
// recorded by `avfs vault replicate --to` beside the vault, in $AVFS_HOME;
// neither is ever read from a vault or from a run's environment.
type replicationConfig struct {
	S3 struct {
		// Endpoint is an S3-compatible server ("" : AWS); a replica URL's
		// ?endpoint= overrides it.
		Endpoint string `json:"endpoint"`
		// Region; a replica URL's ?region= overrides it.
		Region string `json:"region"`
		// ForcePathStyle addresses buckets as ENDPOINT/BUCKET (the
		// default with an endpoint).
		ForcePathStyle *bool `json:"force_path_style"`
		// CredentialsFile holds {"access_key_id": …,
		// "secret_access_key": …}; readable by its owner only. Without
		// it, the AWS SDK's default chain (AWS_ACCESS_KEY_ID and
		// AWS_SECRET_ACCESS_KEY in avfs's own environment,
		// ~/.aws/credentials, an instance role). Relative paths as for
		// policy bundles.
		CredentialsFile string `json:"credentials_file"`
	} `json:"s3"`
}

// replicateOpts are the flags of `avfs vault replicate`.
type replicateOpts struct {
	name       string
	to         string // --to; "" keeps the recorded URL
	foreground bool
	stop       bool
}

func replicateCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "replicate",
		Usage: "replicate a vault, commit by commit, to a directory or S3 (docs/replication.md)",
		UsageText: "avfs vault replicate NAME --to URL [--foreground]   turn replication on (avfs serve runs it)\n" +
			"avfs vault replicate NAME --foreground               run the replicator here, until interrupted\n" +
			"avfs vault replicate NAME --stop                     turn it off\n" +
			"avfs vault replicate NAME                            say where it goes and how far the replica is\n\n" +
			"URL: /ABSOLUTE/DIR, file:///DIR or s3://BUCKET/PATH[?endpoint=URL&region=R]; S3 credentials come from\n" +
			"the config's replication.s3 section or avfs's AWS environment, never the URL.\n\n" +
			"example: avfs vault replicate work --to s3://backups/avfs/work",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "replicate to `URL` (recorded; avfs serve replicates every vault that has one)"},
			&cli.BoolFlag{Name: "foreground", Usage: "replicate from this process until SIGINT or SIGTERM (for a host without avfs serve)"},
			&cli.BoolFlag{Name: "stop", Usage: "stop replicating: forget the URL, stop the replicator, give the write-ahead log back to avfs"},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "NAME")
			if err != nil {
				return err
			}
			opts := replicateOpts{name: a[0], to: c.String("to"), foreground: c.Bool("foreground"), stop: c.Bool("stop")}
			if opts.stop && (opts.to != "" || opts.foreground) {
				return usageError("vault replicate: --stop goes alone")
			}
			return e.replicateAction(c.Context, opts)
		},
	}
}

// restoreOpts are the flags of `avfs vault restore`.
type restoreOpts struct {
	name      string
	from      string
	timestamp time.Time // zero: the latest state
	force     bool
}

func restoreCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "restore a vault from a replica, as it is or as it was at a time (docs/replication.md)",
		UsageText: "avfs vault restore NAME --from URL [--timestamp TIME] [--force]\n\n" +
			"example: avfs vault restore work --from s3://backups/avfs/work --timestamp 2026-12-02T09:30:00Z",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "the replica's `URL` (as for vault replicate --to)"},
			&cli.StringFlag{Name: "timestamp", Usage: "restore the state at `TIME` (RFC 3339, e.g. 2026-12-02T09:30:00Z) instead of the latest"},
			&cli.BoolFlag{Name: "force", Usage: "replace a vault by that name (refused while it is in use or has forks)"},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "NAME")
			if err != nil {
				return err
			}
			opts := restoreOpts{name: a[0], from: c.String("from"), force: c.Bool("force")}
			if opts.from == "" {
				return usageError("vault restore: --from URL is required")
			}
			if ts := c.String("timestamp"); ts != "" {
				if opts.timestamp, err = time.Parse(time.RFC3339Nano, ts); err != nil {
					return wire.Errorf(wire.CodeInvalidInput, "vault restore: --timestamp %q is not an RFC 3339 time such as 2026-12-02T09:30:00Z", ts)
				}
			}
			return e.restoreAction(c.Context, opts)
		},
	}
}

// replicaChildren lists the vaults avfs serve runs a replicator for:
// every vault with a replica mark, by name, with its URL.
func replicaChildren(home string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		marks, _, err := vault.NewStore(home, vault.Options{}).Replicas()
		if err != nil {
			return nil, err
		}
		out := make(map[string]string, len(marks))
		for name, m := range marks {
			out[name] = m.URL
		}
		return out, nil
	}
}

// startReplicators starts avfs serve's replicators: one child process
// per replicated vault (`avfs vault replicate NAME --foreground`),
// started, restarted and stopped as marks come and go, every poll. The
// returned function stops them all and waits.
func startReplicators(ctx context.Context, e *env, exe string, poll time.Duration, logf func(string, ...any)) func() {
	if poll <= 0 {
		poll = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	sup := &supervisor.Supervisor{
		List: replicaChildren(e.home),
		Command: func(name string) []string {
			return []string{replicatorPath(exe), "vault", "replicate", name, "--foreground"}
		},
		Env:    append(os.Environ(), "AVFS_HOME="+e.home),
		Stderr: e.stderr,
		Poll:   poll,
		Logf:   logf,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sup.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
