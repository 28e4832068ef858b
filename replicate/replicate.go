// Package replicate copies a vault file, commit by commit, to a replica —
// a directory or an S3 bucket — with Litestream (as a library), and
// restores it from there, to its latest state or to a point in time.
//
// # One SQLite per process
//
// Litestream reads the database through modernc.org/sqlite, a second
// SQLite with its own lock bookkeeping, while vaults are opened through
// github.com/mattn/go-sqlite3. SQLite's locks on a file are POSIX
// (fcntl) locks, which belong to the process: closing any descriptor of
// the file drops all of them, and each SQLite keeps its own count of who
// in the process still needs them. Two SQLites in one process on one file
// therefore drop each other's locks (a checkpoint could then overwrite
// pages a reader is using). So Run must never run in a process that has
// the same vault open through package vault: avfs runs it in a process of
// its own (`avfs-replicate vault replicate NAME --foreground`, which `avfs
// serve` starts for each replicated vault). Only avfs-replicate (avfs
// built with the avfs_replicator tag) links this package: its
// initialisation costs every process that does (cmd/avfs/replicate_cli.go). Restore writes a new file that no
// vault connection has open, and closes it before returning.
//
// # The write-ahead log
//
// A replicated vault carries the replica mark (vault.ReplicaMarkPath):
// avfs then leaves its log to Litestream, which keeps a read transaction
// open and checkpoints (PASSIVE every 1,000 pages, TRUNCATE past 500 MB)
// once it has copied the frames (vault/replica.go says what avfs does and
// the bound when no replicator runs). Litestream reads the log file
// directly: the avfs-wal VFS writes a commit's frames to it before the
// commit is published in the shared-memory index (vault/walvfs.go), and
// the index is the default unix VFS's, so Litestream's SQLite reads the
// same one.
package replicate

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/benbjohnson/litestream"
	lsfile "github.com/benbjohnson/litestream/file"
	lss3 "github.com/benbjohnson/litestream/s3"
	"github.com/superfly/ltx"

	"avfs/wire"
)

// S3 is how avfs reaches S3 replicas: trusted configuration (the config
// file's "replication" section, or avfs's own environment), never the
// vault or the agent's environment.
type S3 struct {
	// Endpoint is an S3-compatible server's URL ("" is AWS). The
	// replica URL's ?endpoint= overrides it.
	Endpoint string
	// Region ("" : us-east-1 with an endpoint, else the bucket's own).
	// The replica URL's ?region= overrides it.
	Region string
	// ForcePathStyle addresses buckets as endpoint/bucket (on by default
	// with an endpoint).
	ForcePathStyle *bool
	// AccessKeyID and SecretAccessKey; when empty, the AWS SDK's default
	// chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in avfs's
	// environment, ~/.aws/credentials, an instance role).
	AccessKeyID     string
	SecretAccessKey string
}

// Target is a replica and how to reach it.
type Target struct {
	// URL is the replica, as CheckURL returns it.
	URL string
	S3  S3
}

// CheckURL validates a replica URL and returns it in the form avfs
// records: an absolute directory path (or file:///path: the path), or
// s3://BUCKET/PATH with optional endpoint, region and force-path-style
// query parameters. Credentials are refused in the URL (it is recorded
// and shown): they come from trusted configuration (S3). It fails with
// invalid_input.
func CheckURL(raw string) (string, error) {
	bad := func(format string, a ...any) error {
		return wire.Errorf(wire.CodeInvalidInput, "replica URL %q: "+format, append([]any{redact(raw)}, a...)...).With("url", redact(raw))
	}
	if raw == "" {
		return "", bad("empty")
	}
	if !strings.Contains(raw, "://") {
		if !filepath.IsAbs(raw) {
			return "", bad("a directory must be an absolute path")
		}
		return filepath.Clean(raw), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("%v", err)
	}
	if u.User != nil {
		return "", bad("credentials do not belong in the URL: set them in the config file's replication.s3 section or avfs's AWS environment")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(u.Path) {
			return "", bad("file URLs are file:///ABSOLUTE/PATH")
		}
		return filepath.Clean(u.Path), nil
	case "s3":
		if u.Host == "" {
			return "", bad("no bucket: s3://BUCKET/PATH")
		}
		if strings.Trim(u.Path, "/") == "" {
			return "", bad("no path in the bucket: s3://BUCKET/PATH (one path per vault)")
		}
		for k := range u.Query() {
			switch k {
			case "endpoint", "region", "force-path-style", "forcePathStyle":
			default:
				return "", bad("unknown parameter %q (endpoint, region, force-path-style)", k)
			}
		}
		return u.String(), nil
	default:
		return "", bad("unsupported scheme %q: a directory path, file:///PATH or s3://BUCKET/PATH", u.Scheme)
	}
}

// redact drops anything after "@" in the authority of raw, so that a URL
// that (wrongly) carries credentials is never shown with them.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.Index(raw, "@"); i >= 0 && strings.Contains(raw[:i], "://") {
			return raw[:strings.Index(raw, "://")+3] + "REDACTED" + raw[i:]
		}
		return raw
	}
	u.User = url.User("REDACTED")
	return u.String()
}

// client makes the Litestream client of t.
func client(t Target) (litestream.ReplicaClient, error) {
	u, err := CheckURL(t.URL)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(u, "s3://") {
		return lsfile.NewReplicaClient(u), nil
	}
	pu, _ := url.Parse(u)
	c := lss3.NewReplicaClient()
	c.Bucket, c.Path = pu.Host, strings.Trim(pu.Path, "/")
	q := pu.Query()
	c.Endpoint, c.Region = t.S3.Endpoint, t.S3.Region
	if e := q.Get("endpoint"); e != "" {
		c.Endpoint = e
	}
	if r := q.Get("region"); r != "" {
		c.Region = r
	}
	if c.Endpoint != "" {
		c.Endpoint, _ = litestream.EnsureEndpointScheme(c.Endpoint)
		c.ForcePathStyle = true
	}
	if t.S3.ForcePathStyle != nil {
		c.ForcePathStyle = *t.S3.ForcePathStyle
	}
	for _, k := range []string{"force-path-style", "forcePathStyle"} {
		if v := q.Get(k); v != "" {
			c.ForcePathStyle = v == "true" || v == "1"
		}
	}
	c.AccessKeyID, c.SecretAccessKey = t.S3.AccessKeyID, t.S3.SecretAccessKey
	if c.Endpoint != "" {
		// S3-compatible servers commonly refuse the SDK's newer checksum
		// headers; Litestream's defaults for MinIO and the like.
		c.SignPayload, c.RequireContentMD5 = true, true
	}
	return c, nil
}

// replicaErr is err from the replica at t as replica_unavailable, naming
// the URL (never credentials).
func replicaErr(op string, t Target, err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return err
	}
	return wire.Errorf(wire.CodeReplicaUnavailable, "%s %s: %w", op, redact(t.URL), err).With("url", redact(t.URL))
}

// RunOptions tune Run.
type RunOptions struct {
	// Logger receives Litestream's messages (nil: discarded).
	Logger *slog.Logger
	// SyncInterval is how often new log frames are shipped to the replica
	// (0: Litestream's 1 s).
	SyncInterval time.Duration
	// Ready, when set, is called once replication has started.
	Ready func()
}

// Run replicates the SQLite file at dbPath to t until ctx is done, then
// ships what is left (within 30 s) and returns nil. It fails with
// replica_unavailable when the replica cannot be reached or written at
// the start (bad credentials, no such bucket); later failures are retried
// with Litestream's backoff and logged, never fatal: the vault keeps
// working and the log keeps the frames (up to the bound in
// vault/replica.go). It must run in a process that does not have the
// vault open through package vault (package comment). A process killed
// meanwhile loses nothing: the next Run resumes from the replica's
// position, or takes a new snapshot when the log was checkpointed without
// it.
func Run(ctx context.Context, dbPath string, t Target, opts RunOptions) error {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(dbPath); err != nil {
		return wire.Errorf(wire.CodeVaultNotFound, "replicate: %v", err)
	}
	c, err := client(t)
	if err != nil {
		return err
	}
	if err := c.Init(ctx); err != nil {
		return replicaErr("replicate to", t, err)
	}
	// Reach the replica once before starting: a bad bucket or credentials
	// fail here, not in a background retry loop.
	if _, err := latest(ctx, c); err != nil {
		return replicaErr("replicate to", t, err)
	}
	db := litestream.NewDB(dbPath)
	db.Logger = logger
	r := litestream.NewReplicaWithClient(db, c)
	if opts.SyncInterval > 0 {
		r.SyncInterval = opts.SyncInterval
	}
	db.Replica = r
	store := litestream.NewStore([]*litestream.DB{db}, litestream.DefaultCompactionLevels)
	store.Logger = logger
	db.SetLogger(logger) // NewStore gave it the default logger
	if err := store.Open(ctx); err != nil {
		return replicaErr("replicate to", t, err)
	}
	// The first sync opens the database (its read transaction) and ships
	// a snapshot when the replica has none.
	if err := db.Sync(ctx); err != nil {
		_ = store.Close(context.Background())
		return replicaErr("replicate to", t, err)
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.Close(closeCtx); err != nil {
		return replicaErr("replicate: final sync to", t, err)
	}
	return nil
}

// Position is how far a replica goes.
type Position struct {
	// TXID is Litestream's last transaction in the replica (one per sync,
	// not per vault commit); 0 when the replica is empty.
	TXID uint64
	// UpdatedAt is when it was written.
	UpdatedAt time.Time
}

// Latest returns the replica's position. It fails with
// replica_unavailable.
func Latest(ctx context.Context, t Target) (Position, error) {
	c, err := client(t)
	if err != nil {
		return Position{}, err
	}
	if err := c.Init(ctx); err != nil {
		return Position{}, replicaErr("read replica", t, err)
	}
	p, err := latest(ctx, c)
	if err != nil {
		return Position{}, replicaErr("read replica", t, err)
	}
	return p, nil
}

func latest(ctx context.Context, c litestream.ReplicaClient) (Position, error) {
	var p Position
	for _, level := range []int{0, 1, 2, 3, litestream.SnapshotLevel} {
		// With metadata: an S3 object's own time has whole seconds, the
		// timestamp Litestream records in its metadata milliseconds.
		itr, err := c.LTXFiles(ctx, level, 0, true)
		if err != nil {
			return p, err
		}
		for itr.Next() {
			if i := itr.Item(); uint64(i.MaxTXID) > p.TXID || uint64(i.MaxTXID) == p.TXID && i.CreatedAt.After(p.UpdatedAt) {
				p.TXID, p.UpdatedAt = uint64(i.MaxTXID), i.CreatedAt
			}
		}
		err = itr.Err()
		if cerr := itr.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// Restore writes the database the replica at t held at timestamp (zero:
// its latest state) to outPath, which must not exist, and returns the
// position restored. It fails with replica_unavailable when the replica
// cannot be read, and not_found (details: url) when it holds nothing at
// or before timestamp; it leaves no partial file at outPath on failure.
// It checks SQLite's integrity of the result (PRAGMA quick_check).
func Restore(ctx context.Context, t Target, outPath string, timestamp time.Time) (Position, error) {
	c, err := client(t)
	if err != nil {
		return Position{}, err
	}
	if err := c.Init(ctx); err != nil {
		return Position{}, replicaErr("restore from", t, err)
	}
	p, err := latest(ctx, c)
	if err != nil {
		return Position{}, replicaErr("restore from", t, err)
	}
	if p.TXID == 0 {
		return Position{}, wire.Errorf(wire.CodeReplicaEmpty, "restore: the replica %s holds nothing", redact(t.URL)).With("url", redact(t.URL))
	}
	r := litestream.NewReplicaWithClient(nil, c)
	opt := litestream.NewRestoreOptions()
	opt.OutputPath, opt.Timestamp, opt.IntegrityCheck = outPath, timestamp, litestream.IntegrityCheckQuick
	if err := r.Restore(ctx, opt); err != nil {
		for _, p := range []string{outPath, outPath + "-wal", outPath + "-shm", litestream.TXIDPath(outPath)} {
			os.Remove(p)
		}
		return Position{}, restoreErr(t, timestamp, err)
	}
	os.Remove(litestream.TXIDPath(outPath))
	if !timestamp.IsZero() {
		p = Position{}
		if infos, err := litestream.CalcRestorePlan(ctx, c, 0, timestamp, slog.New(slog.DiscardHandler)); err == nil && len(infos) > 0 {
			last := infos[len(infos)-1]
			p = Position{TXID: uint64(last.MaxTXID), UpdatedAt: last.CreatedAt}
		}
	}
	return p, nil
}

// restoreErr classifies a failed Litestream restore: nothing at or
// before timestamp (replica_empty), files that do not check out
// (replica_damaged), else replica_unavailable. Litestream says which only
// in its messages for some of them.
func restoreErr(t Target, timestamp time.Time, err error) error {
	msg := err.Error()
	var lerr *litestream.LTXError
	switch {
	case errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) || strings.Contains(msg, "no matching backup"):
		at := "at all"
		if !timestamp.IsZero() {
			at = "at or before " + timestamp.UTC().Format(time.RFC3339Nano)
		}
		return wire.Errorf(wire.CodeReplicaEmpty, "restore: the replica %s holds nothing %s: %w", redact(t.URL), at, err).With("url", redact(t.URL))
	case errors.As(err, &lerr) || errors.Is(err, ltx.ErrChecksumMismatch) || strings.Contains(msg, "checksum") || strings.Contains(msg, "non-contiguous") ||
		strings.Contains(msg, "integrity check") || strings.Contains(msg, "decode") || strings.Contains(msg, "invalid"):
		return wire.Errorf(wire.CodeReplicaDamaged, "restore from %s: the replica's files do not check out: %w", redact(t.URL), err).With("url", redact(t.URL))
	}
	return replicaErr("restore from", t, err)
}
