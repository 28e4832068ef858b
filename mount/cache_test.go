package mount

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCacheTimes(t *testing.T) {
	for _, c := range []struct {
		name                  string
		opts                  Options
		entry, attr, negative time.Duration
	}{
		{"writer", Options{}, WriterCacheTime, WriterCacheTime, WriterCacheTime},
		{"read-only", Options{ReadOnly: true}, ReaderCacheTime, ReaderCacheTime, 0},
		{"writer, set", Options{EntryTimeout: 2 * time.Second, AttrTimeout: 3 * time.Second}, 2 * time.Second, 3 * time.Second, WriterCacheTime},
		{"read-only, set", Options{ReadOnly: true, EntryTimeout: 5 * time.Second}, 5 * time.Second, ReaderCacheTime, 0},
	} {
		entry, attr, negative := cacheTimes(c.opts)
		if entry != c.entry || attr != c.attr || negative != c.negative {
			t.Errorf("%s: %v %v %v, want %v %v %v", c.name, entry, attr, negative, c.entry, c.attr, c.negative)
		}
	}
}

// A writer mount is the only writer of its vault, so the kernel keeps what
// it was told: a name that does not exist is looked up once however often
// it is probed (as interpreters probe their import paths). A read-only
// mount, whose vault others may change, asks every time.
func TestKernelKeepsMissingNames(t *testing.T) {
	for _, c := range []struct {
		name     string
		readonly bool
		lookups  int
	}{
		{"writer", false, 1},
		{"read-only", true, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "fuse.log")
			s := serve(t, c.readonly, "AVFS_MOUNT_DEBUG_LOG="+logFile)
			for i := 0; i < 3; i++ {
				if _, err := os.Stat(s.path("missing.py")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("stat missing.py: %v", err)
				}
			}
			s.stop() // the log is complete once the server is gone
			b, err := os.ReadFile(logFile)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "LOOKUP") && strings.Contains(line, "missing.py") && strings.Contains(line, "rx ") {
					n++
				}
			}
			if n != c.lookups {
				t.Errorf("LOOKUP requests for missing.py: %d, want %d\n%s", n, c.lookups, b)
			}
		})
	}
}
