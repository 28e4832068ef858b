package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// readVault returns the content of p in the vault name of r's store.
func readVault(t *testing.T, r *Runner, name, p string) string {
	t.Helper()
	ctx := context.Background()
	v, err := r.Store.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var b bytes.Buffer
	if _, err := v.ReadFile(ctx, p, &b); err != nil {
		t.Fatalf("%s %s: %v", name, p, err)
	}
	return b.String()
}

// Two runs at once, each in a new fork of one vault (Request.Fork): each
// changes its fork only, the parent stays as it was, the envelopes name
// the fork and its parent; one fork then merges back.
func TestExecForkParallelThenMerge(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t)
	v, err := r.Store.Create(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteFile(ctx, "/shared.txt", strings.NewReader("base\n"), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	v.Close()
	envs := map[string]*wire.Envelope{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range []string{"try-a", "try-b"} {
		wg.Go(func() {
			req := writeRequest()
			req.Fork, req.Shell = name, "echo "+name+" > shared.txt && echo "+name+" > "+name+".txt"
			env, _ := r.Exec(ctx, req)
			mu.Lock()
			envs[name] = env
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, env := range envs {
		if env.Error != nil || env.Process == nil || env.Process.ExitCode != 0 {
			t.Fatalf("%s: %+v %+v", name, env.Error, env.Process)
		}
		if env.Vault != name || env.ForkedFrom != "default" {
			t.Errorf("%s: envelope vault %q forked_from %q", name, env.Vault, env.ForkedFrom)
		}
		if got := readVault(t, r, name, "/shared.txt"); got != name+"\n" {
			t.Errorf("%s: shared.txt %q", name, got)
		}
	}
	if got := readVault(t, r, "default", "/shared.txt"); got != "base\n" {
		t.Fatalf("the parent changed: %q", got)
	}
	if _, err := r.Store.Merge(ctx, "try-b", vault.MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if a, b := readVault(t, r, "default", "/shared.txt"), readVault(t, r, "default", "/try-b.txt"); a != "try-b\n" || b != "try-b\n" {
		t.Errorf("after the merge: %q %q", a, b)
	}
}

// A fork name that is taken fails the run before anything ran; a run
// that ends before its command started deletes its fork.
func TestExecForkRefusals(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t)
	v, err := r.Store.Create(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	req := writeRequest()
	req.Fork = "default"
	env, status := r.Exec(ctx, req)
	if status != wire.ExitAvfsFailed || env.Error == nil || env.Error.Code != wire.CodeAlreadyExists || env.Process != nil {
		t.Fatalf("fork over an existing vault: %d %+v", status, env.Error)
	}
	denied := writeRequest()
	denied.Fork, denied.Shell = "nope", "cat /etc/passwd"
	env, status = r.Exec(ctx, denied)
	if status != wire.ExitNotRun || env.Decision != wire.Deny || env.Process != nil {
		t.Fatalf("denied run: %d %+v", status, env)
	}
	if _, err := os.Stat(r.Store.PathOf("nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied run's fork stayed: %v", err)
	}
	info, err := func() (vault.Info, error) {
		v, err := r.Store.Open(ctx, "default")
		if err != nil {
			return vault.Info{}, err
		}
		defer v.Close()
		return v.Info(ctx)
	}()
	if err != nil || len(info.Forks) != 0 {
		t.Errorf("the parent still pins forks: %+v %v", info.Forks, err)
	}
}
