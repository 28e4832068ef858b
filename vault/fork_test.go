package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"avfs/wire"
)

func TestForkIsolationDetachAndGC(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	big := randBytes(3 * ChunkSize)
	if _, err := parent.WriteFile(ctx, "/big.bin", bytes.NewReader(big), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	write(t, parent, "/shared.txt", "parent")
	fork, err := s.Fork(ctx, "t", "f")
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	info, err := fork.Info(ctx)
	if err != nil || info.Parent == nil || info.Parent.Name != "t" {
		t.Fatalf("fork info %+v %v", info, err)
	}
	// The fork borrows content: its file holds no chunks.
	var n int
	if err := fork.rdb.QueryRow("SELECT COUNT(*) FROM chunks").Scan(&n); err != nil || n != 0 {
		t.Fatalf("fork stores %d chunks (%v)", n, err)
	}
	var b bytes.Buffer
	if _, err := fork.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("fork read: %v", err)
	}
	write(t, fork, "/shared.txt", "fork")
	write(t, fork, "/only-fork", "f")
	write(t, parent, "/only-parent", "p")
	if read(t, parent, "/shared.txt") != "parent" || read(t, fork, "/shared.txt") != "fork" {
		t.Fatal("writes leaked between parent and fork")
	}
	if _, err := parent.Stat(ctx, "/only-fork"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Fatal("fork file visible in parent")
	}
	if _, err := fork.Stat(ctx, "/only-parent"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Fatal("parent file visible in fork")
	}
	// The parent deletes the file and collects garbage: the fork keeps it.
	if _, err := parent.Remove(ctx, "/big.bin", false); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Prune(ctx, PruneOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.GC(ctx); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if _, err := fork.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("fork lost borrowed data after parent gc: %v", err)
	}
	mustCheck(t, parent)
	mustCheck(t, fork)
	// Delete is refused while the fork lives.
	if err := s.Delete(ctx, "t", false); !wire.HasCode(err, wire.CodeVaultHasForks) {
		t.Fatalf("delete with forks: %v", err)
	}
	// A fork of the fork borrows through two levels.
	ff, err := s.Fork(ctx, "f", "ff")
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	if read(t, ff, "/shared.txt") != "fork" {
		t.Fatal("grandchild content")
	}
	// Force-delete the parent: the fork is detached first and keeps its data.
	parent.Close()
	if err := s.Delete(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.PathOf("t")); !os.IsNotExist(err) {
		t.Fatal("parent file still there")
	}
	fork2, err := s.Open(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer fork2.Close()
	b.Reset()
	if _, err := fork2.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("detached fork read: %v", err)
	}
	if info, _ := fork2.Info(ctx); info.Parent != nil || len(info.Forks) != 1 {
		t.Fatalf("detached fork info %+v", info)
	}
	mustCheck(t, fork2)
	ff2, _ := s.Open(ctx, "ff")
	defer ff2.Close()
	b.Reset()
	if _, err := ff2.ReadFile(ctx, "/big.bin", &b); err != nil || !bytes.Equal(b.Bytes(), big) {
		t.Fatalf("grandchild read after grandparent deletion: %v", err)
	}
}

func TestForkErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newVault(t)
	if _, err := s.Fork(ctx, "nope", "x"); !wire.HasCode(err, wire.CodeVaultNotFound) {
		t.Fatalf("fork missing: %v", err)
	}
	if _, err := s.Fork(ctx, "t", "t"); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("fork onto existing: %v", err)
	}
	if _, err := s.Fork(ctx, "t", "../x"); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("fork bad name: %v", err)
	}
	if err := s.Detach(ctx, "t"); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("detach non-fork: %v", err)
	}
}

// ForkInfo describes the fork it made exactly as Info on the opened fork does.
func TestForkInfo(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	write(t, parent, "/a/b.txt", "hello")
	maxFiles := int64(100)
	if _, err := parent.SetQuota(ctx, QuotaChange{MaxFiles: &maxFiles}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ForkInfo(ctx, "t", "f")
	if err != nil {
		t.Fatal(err)
	}
	fork, err := s.Open(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	want, err := fork.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Parent == nil || want.Parent == nil || *got.Parent != *want.Parent {
		t.Fatalf("ForkInfo parent %+v, Info parent %+v", got.Parent, want.Parent)
	}
	got.Parent, want.Parent = nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ForkInfo %+v\nInfo     %+v", got, want)
	}
	if fi, err := os.Stat(s.PathOf("f")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("fork file mode %v (%v)", fi.Mode(), err)
	}
	if read(t, fork, "/a/b.txt") != "hello" {
		t.Fatal("fork content")
	}
	mustCheck(t, fork)
	mustCheck(t, parent)
	// The parent records the fork and its audit trail says so.
	pi, err := parent.Info(ctx)
	if err != nil || len(pi.Forks) != 1 || pi.Forks[0].Name != "f" || pi.Forks[0].UUID != got.UUID {
		t.Fatalf("parent info %+v %v", pi, err)
	}
	// No temporary file is left behind.
	ents, _ := os.ReadDir(filepath.Dir(s.PathOf("f")))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("left %s", e.Name())
		}
	}
}

// TestForkSpeed times Fork on a 10,000-file / 256 MiB vault, phase by phase.
// It runs only with AVFS_FORK_BENCH set to a directory, where the vault is
// built once and kept; AVFS_FORK_BENCH_N sets the number of forks (default
// 15) and AVFS_FORK_BENCH_CLOSED=1 keeps the parent closed in between (like
// the CLI) instead of open (like a long-running process).
func TestForkSpeed(t *testing.T) {
	dir := os.Getenv("AVFS_FORK_BENCH")
	if dir == "" {
		t.Skip("AVFS_FORK_BENCH not set")
	}
	ctx := context.Background()
	s := NewStore(filepath.Join(dir, "home"), Options{Actor: "bench"})
	if _, err := os.Stat(s.PathOf("big")); err != nil {
		buildBenchVault(t, s, filepath.Join(dir, "src"))
	}
	n := 15
	if v, err := strconv.Atoi(os.Getenv("AVFS_FORK_BENCH_N")); err == nil {
		n = v
	}
	if os.Getenv("AVFS_FORK_BENCH_CLOSED") == "" {
		p, err := s.Open(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
	}
	phases := map[string][]time.Duration{}
	var order []string
	var last time.Time
	forkPhase = func(name string) {
		now := time.Now()
		if _, ok := phases[name]; !ok {
			order = append(order, name)
		}
		phases[name] = append(phases[name], now.Sub(last))
		last = now
	}
	defer func() { forkPhase = nil }()
	var total, cpu []time.Duration
	var faults []int64
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("bench%d", i)
		c0, f0 := cpuTime()
		start := time.Now()
		last = start
		f, err := s.Fork(ctx, "big", name)
		if err != nil {
			t.Fatal(err)
		}
		total = append(total, time.Since(start))
		c1, f1 := cpuTime()
		cpu = append(cpu, c1-c0)
		faults = append(faults, f1-f0)
		f.Close()
		if err := s.Delete(ctx, name, false); err != nil {
			t.Fatal(err)
		}
	}
	med := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	for _, p := range order {
		t.Logf("%-26s median %6.2f ms  min %6.2f ms", p, float64(med(phases[p]))/1e6, float64(slices.Min(phases[p]))/1e6)
	}
	t.Logf("%-26s median %6.2f ms  min %6.2f ms", "TOTAL", float64(med(total))/1e6, float64(slices.Min(total))/1e6)
	t.Logf("%-26s median %6.2f ms  min %6.2f ms", "CPU", float64(med(cpu))/1e6, float64(slices.Min(cpu))/1e6)
	slices.Sort(faults)
	t.Logf("%-26s median %6d     min %6d", "page faults", faults[len(faults)/2], faults[0])
}

// cpuTime is the CPU time the process has used and its page faults.
func cpuTime() (time.Duration, int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt + ru.Majflt
}

// buildBenchVault makes the vault "big" like tests/bench: 10,000 files in
// 100 directories, 256 MiB of random content, 20 checkpoints and 5
// restores after rewriting 100 files.
func buildBenchVault(t *testing.T, s *Store, src string) {
	ctx := context.Background()
	const files, total = 10000, 256 << 20
	buf := make([]byte, total/files)
	for i := 0; i < files; i++ {
		d := filepath.Join(src, fmt.Sprintf("d%02d", i%100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(src)
	v, err := s.Create(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Import(ctx, src, "/"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := v.SaveCheckpoint(ctx, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := v.SaveCheckpoint(ctx, "base", "")
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 5; r++ {
		for i := 0; i < 100; i++ {
			write(t, v, fmt.Sprintf("/d%02d/f%05d", i%100, i), "changed")
		}
		if _, err := v.RestoreCheckpoint(ctx, cp.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// A fork has the same indexes as its parent.
func TestForkIndexes(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	write(t, parent, "/x", "x")
	fork, err := s.Fork(ctx, "t", "f")
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	list := func(v *Vault) string {
		rows, err := v.rdb.Query("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var n, q string
			rows.Scan(&n, &q)
			fmt.Fprintf(&b, "%s: %s\n", n, q)
		}
		return b.String()
	}
	if a, b := list(parent), list(fork); a != b || a == "" {
		t.Fatalf("parent indexes:\n%s\nfork indexes:\n%s", a, b)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"a", "Z9", "work_1-x", "0" + strings.Repeat("x", 63)} {
		if err := ValidName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"", "_a", "-a", "a.b", "a/b", "../x", "é", "a b", strings.Repeat("x", 65), "a\x00"} {
		if err := ValidName(n); !wire.HasCode(err, wire.CodeInvalidInput) {
			t.Errorf("%q accepted", n)
		}
	}
}
