package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A guard leaves the run alone when avfs says it is done, and cleans up
// when avfs's end of the pipe closes without it: the processes still in the
// run's directory end and the directory goes.
func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ctl   string
		clean bool
	}{
		{"done", guardDone, false},
		{"avfs died", "", true},
		{"avfs died mid-line", "do", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "avfs-exec-1-x")
			root := filepath.Join(base, "root")
			if err := os.MkdirAll(root, 0o700); err != nil {
				t.Fatal(err)
			}
			inside := exec.Command("sleep", "60")
			inside.Dir = root
			if err := inside.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { inside.Wait(); close(exited) }()
			defer inside.Process.Kill()

			Guard(context.Background(), strings.NewReader(tc.ctl), base)
			_, err := os.Stat(base)
			if gone := os.IsNotExist(err); gone != tc.clean {
				t.Fatalf("run directory gone: %v, want %v", gone, tc.clean)
			}
			select {
			case <-exited:
				if !tc.clean {
					t.Fatal("a process in a live run was killed")
				}
			case <-time.After(time.Second):
				if tc.clean {
					t.Fatal("the process in the dead run's directory still runs")
				}
			}
		})
	}
}

// A cancelled guard (the guard itself told to stop) cleans nothing.
func TestGuardCancelled(t *testing.T) {
	base := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, w, _ := os.Pipe()
	defer w.Close()
	defer r.Close()
	Guard(ctx, r, base)
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("cancelled guard removed the run: %v", err)
	}
}
