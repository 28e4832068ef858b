package mount

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// TestPosix runs go-fuse's POSIX test suite against a mounted vault.
// skipPosix names tests that assume FUSE-side lock tracking: with the
// kernel's own POSIX locks (as on ext4), locks of one process never conflict.
var skipPosix = map[string]string{
	"FcntlFlockLocksFile": "expects two fds of one process to conflict, which POSIX record locks do not do on local file systems either",
}

func TestPosix(t *testing.T) {
	s := serve(t, false)
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if why, ok := skipPosix[name]; ok {
				t.Skip(why)
			}
			dir := s.path(name)
			if err := mkdir(dir); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, dir)
		})
	}
	s.stop()
	s.mustCheck()
}
