package mount

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"avfs/wire"
)

// TestRefused tells a mount this process may not make from other failures,
// and NotPermitted makes the typed error of one.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "mount", Path: "/d", Err: syscall.EPERM}, true},
		{fmt.Errorf("mount: %w", syscall.EACCES), true},
		{errors.New("fusermount exited with code 256\n"), true},
		{syscall.ENOENT, false},
		{errors.New("ready: timeout"), false},
	} {
		if got := refused(c.err); got != c.want {
			t.Errorf("refused(%q) = %v, want %v", c.err, got, c.want)
		}
	}
	err := NotPermitted("/d", errors.New("fusermount exited with code 256\n"))
	if !wire.HasCode(err, wire.CodeFuseUnavailable) || !errors.Is(err, ErrNotPermitted) {
		t.Errorf("NotPermitted: %v (code %s)", err, wire.CodeOf(err))
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "not permitted") {
		t.Errorf("NotPermitted message %q", msg)
	}
	if err := NotPermitted("/d", syscall.EPERM); !errors.Is(err, syscall.EPERM) {
		t.Errorf("NotPermitted does not wrap its cause: %v", err)
	}
}
