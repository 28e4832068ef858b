// Command bench measures avfs and writes docs/benchmarks.md (`make bench`).
// Each area registers a section in its own file; sections run in name order.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// section is one table of docs/benchmarks.md.
type section struct {
	Title  string
	Intro  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// config is what every section gets.
type config struct {
	Bin  string // the built avfs binary
	Work string // a scratch directory, removed afterwards
	Only string // run only sections whose key contains this
}

type sectionFunc func(ctx context.Context, cfg config) ([]section, error)

var registry = map[string]sectionFunc{}

// register adds a section producer under key (sections run in key order).
func register(key string, f sectionFunc) { registry[key] = f }

func main() {
	out := flag.String("out", "docs/benchmarks.md", "markdown file to write")
	only := flag.String("only", "", "run only sections whose key contains this")
	flag.Parse()
	bin := os.Getenv("AVFS_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("bin/avfs")
	}
	work, err := os.MkdirTemp("", "avfs-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(work)
	cfg := config{Bin: bin, Work: work, Only: *only}
	keys := make([]string, 0, len(registry))
	for k := range registry {
		if strings.Contains(k, *only) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Benchmarks\n\nWritten by `make bench` on %s (%s, %d CPUs, %s, host %s). Absolute times are noisy on shared machines; compare within one run.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), runtime.Version(), host)
	failed := false
	for _, k := range keys {
		fmt.Fprintf(os.Stderr, "bench: %s\n", k)
		secs, err := registry[k](context.Background(), cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", k, err)
			fmt.Fprintf(&b, "## %s\n\nFailed: %v\n\n", k, err)
			failed = true
			continue
		}
		for _, s := range secs {
			writeSection(&b, s)
		}
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(b.String())
	if failed {
		os.Exit(1)
	}
}

func writeSection(b *strings.Builder, s section) {
	fmt.Fprintf(b, "## %s\n\n", s.Title)
	if s.Intro != "" {
		fmt.Fprintf(b, "%s\n\n", s.Intro)
	}
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(s.Header, " | "), strings.Repeat(" --- |", len(s.Header)))
	for _, r := range s.Rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
	b.WriteString("\n")
	for _, n := range s.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	if len(s.Notes) > 0 {
		b.WriteString("\n")
	}
}

// timeIt runs f n times and returns the durations sorted.
func timeIt(n int, f func() error) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(start))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds, nil
}

// median and p99 of sorted durations.
func median(ds []time.Duration) time.Duration { return ds[len(ds)/2] }
func p99(ds []time.Duration) time.Duration    { return ds[(len(ds)*99)/100] }

// fmtDur formats a duration with a unit that suits it.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d.Nanoseconds())/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// timeInTurns runs every f once to warm up, then n rounds in which each
// runs once, so that a change of load on the machine weighs on all of them
// alike. It returns each f's durations, sorted.
func timeInTurns(n int, fs ...func() error) ([][]time.Duration, error) {
	for _, f := range fs {
		if err := f(); err != nil {
			return nil, err
		}
	}
	times := make([][]time.Duration, len(fs))
	for range n {
		for i, f := range fs {
			start := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	for _, ds := range times {
		sortDur(ds)
	}
	return times, nil
}

func sortDur(ds []time.Duration) { sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] }) }
