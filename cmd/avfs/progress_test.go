package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"avfs/vault"
)

func TestProgressLine(t *testing.T) {
	const mib = 1 << 20
	type step struct {
		at          time.Duration // since the first report
		done, total vault.Work
		want        string // what this report writes
	}
	for _, tc := range []struct {
		name, what, unit string
		cols             int
		steps            []step
	}{
		{name: "bytes and files, with totals", what: "import", unit: "files", steps: []step{
			{0, vault.Work{}, vault.Work{Items: 1000, Bytes: 100 * mib}, ""},
			{50 * time.Millisecond, vault.Work{Items: 10, Bytes: mib}, vault.Work{Items: 1000, Bytes: 100 * mib}, ""}, // too soon: quick work draws nothing
			{time.Second, vault.Work{Items: 500, Bytes: 50 * mib}, vault.Work{Items: 1000, Bytes: 100 * mib},
				"\rimport: 500/1000 files, 50.0 MiB/100.0 MiB, 50.0 MiB/s, 1s left"},
			{time.Second + 50*time.Millisecond, vault.Work{Items: 501, Bytes: 51 * mib}, vault.Work{Items: 1000, Bytes: 100 * mib}, ""}, // 10 Hz at most
			{2 * time.Second, vault.Work{Items: 600, Bytes: 80 * mib}, vault.Work{Items: 1000, Bytes: 100 * mib},
				"\rimport: 600/1000 files, 80.0 MiB/100.0 MiB, 40.0 MiB/s, 1s left"},
			{4 * time.Second, vault.Work{Items: 1000, Bytes: 100 * mib}, vault.Work{Items: 1000, Bytes: 100 * mib},
				"\r" + strings.Repeat(" ", 63) + "\r"}, // done: the line is cleared
		}},
		{name: "the time left goes by what lags: files after a large one", what: "export", unit: "files", steps: []step{
			{0, vault.Work{}, vault.Work{Items: 100, Bytes: 100 * mib}, ""},
			{time.Second, vault.Work{Items: 1, Bytes: 99 * mib}, vault.Work{Items: 100, Bytes: 100 * mib},
				"\rexport: 1/100 files, 99.0 MiB/100.0 MiB, 99.0 MiB/s, 1m39s left"},
		}},
		{name: "no totals", what: "import", unit: "files", steps: []step{
			{0, vault.Work{}, vault.Work{}, ""},
			{2 * time.Second, vault.Work{Items: 5, Bytes: 2048}, vault.Work{}, "\rimport: 5 files, 2.0 KiB, 1.0 KiB/s"},
		}},
		{name: "items only", what: "gc", unit: "steps", steps: []step{
			{0, vault.Work{}, vault.Work{Items: 4}, ""},
			{2 * time.Second, vault.Work{Items: 2}, vault.Work{Items: 4}, "\rgc: 2/4 steps, 1 steps/s, 2s left"},
			{3 * time.Second, vault.Work{Items: 3}, vault.Work{Items: 4}, "\rgc: 3/4 steps, 1 steps/s, 1s left"},
		}},
		{name: "a shorter line blanks the rest of the longer", what: "detach", unit: "chunks", steps: []step{
			{0, vault.Work{}, vault.Work{Items: 100}, ""},
			{time.Second, vault.Work{Items: 10, Bytes: 10 * mib}, vault.Work{Items: 100}, "\rdetach: 10/100 chunks, 10.0 MiB, 10.0 MiB/s, 9s left"},
			{10 * time.Second, vault.Work{Items: 20, Bytes: 20}, vault.Work{Items: 100}, "\rdetach: 20/100 chunks, 20 B, 2 B/s, 40s left" + strings.Repeat(" ", 8)},
		}},
		{name: "cut to the terminal's width", what: "export", unit: "files", cols: 20, steps: []step{
			{0, vault.Work{}, vault.Work{Items: 10}, ""},
			{time.Second, vault.Work{Items: 5}, vault.Work{Items: 10}, "\rexport: 5/10 files, "},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
			now := start
			p := newProgressLine(&buf, tc.what, tc.unit, func() time.Time { return now })
			p.cols = tc.cols
			report := p.report()
			for i, s := range tc.steps {
				now = start.Add(s.at)
				buf.Reset()
				report(s.done, s.total)
				if got := buf.String(); got != s.want {
					t.Fatalf("report %d: wrote %q, want %q", i, got, s.want)
				}
			}
			buf.Reset()
			p.finish()
			if buf.Len() > 0 && !strings.HasPrefix(buf.String(), "\r ") {
				t.Errorf("finish wrote %q", buf.String())
			}
			buf.Reset()
			p.finish()
			if buf.Len() > 0 {
				t.Errorf("a second finish wrote %q", buf.String())
			}
		})
	}
}

// No progress unless stderr is a terminal and the output is not --json;
// a nil line reports nothing and finishes quietly.
func TestProgressOff(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range []*env{{stderr: &bytes.Buffer{}}, {stderr: f}, {stderr: f, json: true}} {
		p := e.progress("import", "files")
		if p != nil {
			t.Fatalf("progress on %T (json %v)", e.stderr, e.json)
		}
		if p.report() != nil {
			t.Fatal("a nil line gives a ProgressFunc")
		}
		p.finish()
	}
	if fi, _ := f.Stat(); fi.Size() != 0 {
		t.Fatalf("%d bytes written to a file", fi.Size())
	}
}
