package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"avfs/vault"
	"avfs/wire"
)

// syncBuffer is a bytes.Buffer safe for a process's writes and a test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// poll calls ok until it returns true or the deadline passes.
func poll(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicaTarget is where a test replicates to: a URL and the config the
// homes that use it need.
type replicaTarget struct {
	url    string
	config string // config.json for every home ("" : none)
}

func (r replicaTarget) setup(t *testing.T, a *avfs) {
	t.Helper()
	if r.config != "" {
		if err := os.WriteFile(filepath.Join(a.home, "config.json"), []byte(r.config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func fileTarget(t *testing.T) replicaTarget {
	return replicaTarget{url: filepath.Join(t.TempDir(), "replica")}
}

// versitygwBin finds the S3 server the tests use: $AVFS_VERSITYGW, else
// bin/tools/versitygw (make deps), else versitygw on $PATH. Missing, the
// test skips, or fails under CI=true.
func versitygwBin(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("AVFS_VERSITYGW")}
	if _, file, _, ok := runtime.Caller(0); ok {
		cands = append(cands, filepath.Join(filepath.Dir(file), "..", "..", "bin", "tools", "versitygw"))
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("versitygw is required in CI (make deps builds bin/tools/versitygw)")
	}
	t.Skip("no versitygw: `make deps` builds bin/tools/versitygw (tests/tools/go.mod)")
	return ""
}

// s3Server is a versitygw serving a temporary directory on loopback.
type s3Server struct {
	endpoint       string
	access, secret string
}

// startS3 starts versitygw (posix backend) on a free loopback port with a
// bucket "avfs", and stops it when the test ends.
func startS3(t *testing.T) s3Server {
	t.Helper()
	bin := versitygwBin(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "avfs"), 0o755); err != nil { // the posix backend's buckets are its directories
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := s3Server{endpoint: "http://" + addr, access: "avfstestaccess", secret: "avfstestsecret0123456789"}
	var logs syncBuffer
	// Object metadata (Litestream's timestamps, which --timestamp restores
	// go by) in a sidecar directory: no extended attributes needed.
	cmd := exec.Command(bin, "--access", s.access, "--secret", s.secret, "--port", addr, "posix", "--sidecar", t.TempDir(), dir)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("versitygw:\n%s", logs.String())
		}
	})
	poll(t, 20*time.Second, "versitygw did not answer on "+addr, func() bool {
		resp, err := http.Get(s.endpoint + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return s
}

func s3Target(t *testing.T, s s3Server, path string) replicaTarget {
	t.Helper()
	creds := filepath.Join(t.TempDir(), "s3.json")
	b, _ := json.Marshal(map[string]string{"access_key_id": s.access, "secret_access_key": s.secret})
	if err := os.WriteFile(creds, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"replication": map[string]any{"s3": map[string]any{"endpoint": s.endpoint, "credentials_file": creds}}})
	return replicaTarget{url: "s3://avfs/" + path, config: string(cfg)}
}

// replicator is `avfs vault replicate NAME --foreground` running.
type replicator struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

func (a *avfs) startReplicator(t *testing.T, args ...string) *replicator {
	t.Helper()
	cmd := exec.Command(avfsBin, append([]string{"vault", "replicate"}, append(args, "--foreground")...)...)
	cmd.Env = append(append(os.Environ(), "AVFS_HOME="+a.home), a.env...)
	r := &replicator{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(r.done) }()
	t.Cleanup(r.kill)
	poll(t, 30*time.Second, "the replicator did not start", func() bool {
		select {
		case <-r.done:
			t.Fatalf("the replicator exited: %s", r.stderr.String())
		default:
		}
		return strings.Contains(r.stderr.String(), "avfs: replicating vault")
	})
	return r
}

// kill ends the replicator with SIGKILL: nothing of it runs after.
func (r *replicator) kill() {
	r.cmd.Process.Kill()
	<-r.done
}

// waitReplicated waits until the replica at r holds vault name of a's
// home as it is now: a restore of it into a scratch home reads the same
// tree.
func waitReplicated(t *testing.T, r replicaTarget, a *avfs, name string) {
	t.Helper()
	want := tree(t, a.home, name)
	probe := newAVFS(t)
	r.setup(t, probe)
	poll(t, 60*time.Second, "the replica did not catch up with vault "+name, func() bool {
		res := probe.json(nil, "vault", "restore", "probe", "--from", r.url, "--force")
		if res.code != 0 {
			return false
		}
		got := tree(t, probe.home, "probe")
		if len(got) != len(want) {
			return false
		}
		for p, w := range want {
			if got[p] != w {
				return false
			}
		}
		return true
	})
}

// fileState is what the tree comparison holds of one path.
type fileState struct {
	Kind   vault.Kind
	Mode   wire.FileMode
	UID    uint32
	GID    uint32
	Size   int64
	Mtime  int64
	Target string
	SHA    [32]byte
}

// tree reads every path of vault name in home (the vault package,
// read-only: nothing else has it open then but a replicator process).
func tree(t *testing.T, home, name string) map[string]fileState {
	t.Helper()
	ctx := context.Background()
	v, err := vault.NewStore(home, vault.Options{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	out := map[string]fileState{}
	err = v.Walk(ctx, "/", func(e vault.Entry) error {
		fs := fileState{Kind: e.Kind, Mode: e.Mode, UID: e.UID, GID: e.GID, Size: e.Size, Mtime: e.Mtime.UnixNano(), Target: e.Target}
		if e.Kind == vault.KindFile {
			var b bytes.Buffer
			if _, err := v.ReadFile(ctx, e.Path, &b); err != nil {
				return err
			}
			fs.SHA = sha256.Sum256(b.Bytes())
		}
		out[e.Path] = fs
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]fileState) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			t.Fatalf("%s: %s is %+v, want %+v", what, p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Fatalf("%s: %s should not be there", what, p)
		}
	}
}

// writeFiles writes n files under dir in vault name, one command each,
// and a 1 MiB file of random bytes.
func (a *avfs) writeFiles(t *testing.T, name, dir string, n int) {
	t.Helper()
	for i := range n {
		a.okIn([]byte(fmt.Sprintf("file %d of %s\n", i, dir)), "--vault", name, "write", "-p", fmt.Sprintf("%s/f%02d.txt", dir, i))
	}
	big := make([]byte, 1<<20)
	rand.Read(big)
	a.okIn(big, "--vault", name, "write", "-p", dir+"/big.bin")
}

// TestReplicateRestore: a vault replicated (to a directory, and to an S3
// server) while it is written, its replicator killed with SIGKILL and
// started again, restores on another installation byte for byte — its
// latest state, and its state before a destructive run with --timestamp —
// and the restored vaults pass vault check. With no replicator running,
// avfs leaves the replicated vault's log alone.
func TestReplicateRestore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target func(t *testing.T) replicaTarget
	}{
		{"file", fileTarget},
		{"s3", func(t *testing.T) replicaTarget { return s3Target(t, startS3(t), "vaults/w") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target(t)
			a := newAVFS(t)
			target.setup(t, a)
			a.ok("vault", "create", "w")
			a.writeFiles(t, "w", "/before", 3)

			r := a.startReplicator(t, "w", "--to", target.url)
			a.writeFiles(t, "w", "/d", 6) // written while replicating
			a.okIn(nil, "--vault", "w", "mkdir", "-p", "/d/sub")
			waitReplicated(t, target, a, "w")
			beforeRm := tree(t, a.home, "w")
			pit := time.Now().UTC()

			a.ok("--vault", "w", "rm", "-r", "/d") // the destructive run
			waitReplicated(t, target, a, "w")
			r.kill()

			// Nobody replicates now: avfs leaves the log to the replicator.
			a.writeFiles(t, "w", "/while-down", 1)
			if fi, err := os.Stat(filepath.Join(a.home, "vaults", "w.avfs-wal")); err != nil || fi.Size() == 0 {
				t.Fatalf("the replicated vault's log was folded while no replicator ran: %v", err)
			}
			a.startReplicator(t, "w") // resumes with the recorded URL
			a.writeFiles(t, "w", "/after", 2)
			waitReplicated(t, target, a, "w")
			latest := tree(t, a.home, "w")

			b := newAVFS(t) // another installation, with the audit key copied along
			target.setup(t, b)
			os.MkdirAll(filepath.Join(b.home, "keys"), 0o700)
			key, err := os.ReadFile(filepath.Join(a.home, "keys", "audit.key"))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(b.home, "keys", "audit.key"), key, 0o600)

			var res wire.VaultRestore
			b.into(&res, "vault", "restore", "w", "--from", target.url)
			if res.Vault.Name != "w" || res.Timestamp != nil {
				t.Fatalf("restore: %+v", res)
			}
			b.ok("vault", "check", "w")
			sameTree(t, "latest restore", tree(t, b.home, "w"), latest)

			b.into(&res, "vault", "restore", "w-before", "--from", target.url, "--timestamp", pit.Format(time.RFC3339Nano))
			if res.Vault.Name != "w-before" {
				t.Fatalf("point-in-time restore: %+v", res)
			}
			b.ok("vault", "check", "w-before")
			sameTree(t, "restore to before rm -r", tree(t, b.home, "w-before"), beforeRm)

			// An existing vault is never overwritten unless told.
			e := b.json(nil, "vault", "restore", "w", "--from", target.url)
			if e.code == 0 || !strings.Contains(string(e.raw), string(wire.CodeAlreadyExists)) {
				t.Fatalf("restore over an existing vault: %s", e.raw)
			}
			b.into(&res, "vault", "restore", "w", "--from", target.url, "--force")
			b.ok("vault", "check", "w")

			if tc.name == "file" { // a damaged replica restores nothing
				bad := filepath.Join(t.TempDir(), "bad")
				if out, err := exec.Command("cp", "-r", target.url, bad).CombinedOutput(); err != nil {
					t.Fatalf("cp: %v %s", err, out)
				}
				ltxs, _ := filepath.Glob(filepath.Join(bad, "ltx", "*", "*.ltx"))
				if len(ltxs) == 0 {
					t.Fatal("no LTX files in the replica")
				}
				for _, p := range ltxs { // flip bytes past the header of every file
					data, _ := os.ReadFile(p)
					for i := 200; i < len(data) && i < 400; i++ {
						data[i] ^= 0xff
					}
					os.WriteFile(p, data, 0o644)
				}
				e := b.json(nil, "vault", "restore", "bad", "--from", bad)
				if e.code == 0 || !strings.Contains(string(e.raw), string(wire.CodeReplicaDamaged)) {
					t.Fatalf("restore from a damaged replica: %s", e.raw)
				}
				if _, err := os.Stat(filepath.Join(b.home, "vaults", "bad.avfs")); !os.IsNotExist(err) {
					t.Fatalf("a damaged replica left a vault: %v", err)
				}
			}

			// Too early: nothing then.
			e = b.json(nil, "vault", "restore", "old", "--from", target.url, "--timestamp", "2001-01-01T00:00:00Z")
			if e.code == 0 || !strings.Contains(string(e.raw), string(wire.CodeReplicaEmpty)) {
				t.Fatalf("restore before the replica began: %s", e.raw)
			}
		})
	}
}

// replicatorRunning says whether a replicator holds vault name's lock.
func replicatorRunning(t *testing.T, home, name string) bool {
	t.Helper()
	f, err := os.OpenFile(vault.ReplicatorLockPath(filepath.Join(home, "vaults", name+".avfs")), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// TestServeReplicates: avfs serve replicates every vault with a replica,
// picks up one turned on while it runs, stops the replicator of one
// turned off, and stops them all when it stops.
func TestServeReplicates(t *testing.T) {
	a := newAVFS(t)
	w, w2 := fileTarget(t), fileTarget(t)
	a.ok("vault", "create", "w")
	a.writeFiles(t, "w", "/a", 2)
	a.ok("vault", "replicate", "w", "--to", w.url)
	d := a.serve("--poll", "200ms")
	waitReplicated(t, w, a, "w")
	a.writeFiles(t, "w", "/b", 2)
	waitReplicated(t, w, a, "w")

	a.ok("vault", "create", "w2") // turned on while serve runs
	a.writeFiles(t, "w2", "/c", 1)
	a.ok("vault", "replicate", "w2", "--to", w2.url)
	waitReplicated(t, w2, a, "w2")

	var st wire.VaultReplica
	a.into(&st, "vault", "replicate", "w", "--stop") // returns once its replicator stopped
	if st.Replicated || replicatorRunning(t, a.home, "w") {
		t.Fatalf("--stop: %+v, replicator running %v", st, replicatorRunning(t, a.home, "w"))
	}
	if _, err := os.Stat(vault.LitestreamDir(filepath.Join(a.home, "vaults", "w.avfs"))); !os.IsNotExist(err) {
		t.Fatalf("the replicator's state is left after --stop: %v", err)
	}
	if !replicatorRunning(t, a.home, "w2") {
		t.Fatal("w2's replicator stopped with w's")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if replicatorRunning(t, a.home, "w2") {
		t.Fatal("a replicator outlived avfs serve")
	}
}

// TestReplicateBadInput: bad flags, URLs, credentials and replicas fail
// with a typed error, never print a secret, and leave the vault
// unreplicated.
func TestReplicateBadInput(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "w")
	a.ok("vault", "create", "base")
	a.ok("vault", "fork", "base", "kid")
	empty := t.TempDir()
	loose := filepath.Join(t.TempDir(), "creds.json")
	os.WriteFile(loose, []byte(`{"access_key_id":"AK","secret_access_key":"hunter2hunter2"}`), 0o644)
	for _, tc := range []struct {
		name   string
		config string
		args   []string
		exit   int
		code   wire.Code
	}{
		{"no name", "", []string{"vault", "replicate"}, 2, wire.CodeUsage},
		{"stop with to", "", []string{"vault", "replicate", "w", "--stop", "--to", empty}, 2, wire.CodeUsage},
		{"no such vault", "", []string{"vault", "replicate", "nope", "--to", empty}, 1, wire.CodeVaultNotFound},
		{"relative path", "", []string{"vault", "replicate", "w", "--to", "replica"}, 1, wire.CodeInvalidInput},
		{"unknown scheme", "", []string{"vault", "replicate", "w", "--to", "gs://b/p"}, 1, wire.CodeInvalidInput},
		{"credentials in the URL", "", []string{"vault", "replicate", "w", "--to", "s3://AK:hunter2hunter2@bucket/p"}, 1, wire.CodeInvalidInput},
		{"s3 without a path", "", []string{"vault", "replicate", "w", "--to", "s3://bucket"}, 1, wire.CodeInvalidInput},
		{"a fork", "", []string{"vault", "replicate", "kid", "--to", empty}, 1, wire.CodeInvalidInput},
		{"foreground without a replica", "", []string{"vault", "replicate", "w", "--foreground"}, 1, wire.CodeInvalidInput},
		{"unreachable S3", "", []string{"vault", "replicate", "w", "--to", "s3://bucket/p?endpoint=http://127.0.0.1:1"}, 1, wire.CodeReplicaUnavailable},
		{"credentials file readable by others", `{"replication":{"s3":{"credentials_file":"` + loose + `"}}}`,
			[]string{"vault", "replicate", "w", "--to", "s3://bucket/p?endpoint=http://127.0.0.1:1"}, 1, wire.CodeInvalidInput},
		{"restore without --from", "", []string{"vault", "restore", "x"}, 2, wire.CodeUsage},
		{"restore a bad timestamp", "", []string{"vault", "restore", "x", "--from", empty, "--timestamp", "yesterday"}, 1, wire.CodeInvalidInput},
		{"restore from an empty replica", "", []string{"vault", "restore", "x", "--from", empty}, 1, wire.CodeReplicaEmpty},
		{"restore over a vault", "", []string{"vault", "restore", "w", "--from", empty}, 1, wire.CodeAlreadyExists},
		{"restore from unreachable S3", "", []string{"vault", "restore", "x", "--from", "s3://bucket/p?endpoint=http://127.0.0.1:1"}, 1, wire.CodeReplicaUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(a.home, "config.json"), []byte(tc.config+"\n"), 0o600)
			if tc.config == "" {
				os.Remove(filepath.Join(a.home, "config.json"))
			}
			a := &avfs{t: t, home: a.home, env: []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_EC2_METADATA_DISABLED=true"}}
			r := a.json(nil, tc.args...)
			if r.code != tc.exit || !strings.Contains(string(r.raw), `"code": "`+string(tc.code)+`"`) {
				t.Fatalf("avfs %q: want exit %d %s, got %d: %s %s", tc.args, tc.exit, tc.code, r.code, r.raw, r.stderr)
			}
			if strings.Contains(string(r.raw)+string(r.stderr), "hunter2") {
				t.Fatalf("a secret was printed: %s %s", r.raw, r.stderr)
			}
		})
	}
	var st wire.VaultReplica
	a.into(&st, "vault", "replicate", "w")
	if st.Replicated {
		t.Fatalf("a failed --to left the vault replicated: %+v", st)
	}
}

// TestReplicatorMissing: without avfs-replicate, replication commands
// fail with a typed error that says what is missing.
func TestReplicatorMissing(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "w")
	a.env = []string{"AVFS_REPLICATOR=" + filepath.Join(t.TempDir(), "avfs-replicate")}
	for _, args := range [][]string{{"vault", "replicate", "w"}, {"vault", "restore", "x", "--from", t.TempDir()}} {
		e := a.fail(1, string(wire.CodeInternal), args...)
		if msg, _ := e["message"].(string); !strings.Contains(msg, "avfs-replicate") {
			t.Fatalf("avfs %q: %s", args, msg)
		}
	}
}
