package runner

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"sync"
	"testing"

	"avfs/mount"
	"avfs/tests/fullfs"
	"avfs/vault"
	"avfs/wire"
)

// TestFullDiskMidRun: a run during which the vault's disk fills up fails
// with no_space (a FUSE run used to say internal), and its envelope still
// lists the changes committed before (a FUSE run commits each file at
// close; a materialised run brings its copy back in one transaction at
// the end, so nothing of it lands). In the FUSE run, the file created
// after the disk filled could not be committed when the mount went; its
// creator was told so at close.
func TestFullDiskMidRun(t *testing.T) {
	if err := mount.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE is required in CI: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
	cases := []struct {
		mode    string
		changes []string // paths listed
	}{
		{ModeFUSE, []string{"/a.txt"}},
		{ModeMaterialize, nil},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			small := fullfs.Mount(t, 16<<20)
			r := newTestRunner(t)
			r.Store = vault.NewStore(small, vault.Options{Actor: "test"})
			// The command waits, once a.txt is written (closed), until the
			// test has filled the disk: it says "ready" and reads a line.
			var filler string
			var fillErr error
			stdinR, stdinW := io.Pipe()
			defer stdinW.Close()
			ready := &onLine{line: "ready", do: func() {
				filler, fillErr = fullfs.TryFill(small)
				stdinW.Write([]byte("go\n"))
			}}
			req := Request{Vault: "default", Cwd: "/", Timeout: DefaultTimeout, MountMode: tc.mode, AllowWritableTrust: true,
				Stdin: stdinR, Stdout: ready, Shell: "echo a > a.txt && echo ready && read x; echo b > b.txt; true"}
			env, status := r.Exec(context.Background(), req)
			if fillErr != nil || filler == "" {
				t.Fatalf("fill the disk: %v", fillErr)
			}
			if status != wire.ExitAvfsFailed || env.Error == nil || env.Error.Code != wire.CodeNoSpace {
				t.Fatalf("status %d error %+v", status, env.Error)
			}
			var paths []string
			for _, c := range env.Changes {
				if c.Op != "added" {
					t.Errorf("change %+v", c)
				}
				paths = append(paths, c.Path)
			}
			if !slices.Equal(paths, tc.changes) || env.ChangesTotal != len(tc.changes) {
				t.Fatalf("changes %+v (total %d), want %v", env.Changes, env.ChangesTotal, tc.changes)
			}
			if env.Process == nil || env.Process.ExitCode != 0 {
				t.Fatalf("process %+v", env.Process)
			}
			// The vault holds what the envelope says, and is sound.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			v, err := r.Store.Open(context.Background(), "default")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			for _, p := range []string{"/a.txt", "/b.txt"} {
				_, err := v.Stat(context.Background(), p)
				if listed := slices.Contains(tc.changes, p); (err == nil) != listed {
					t.Errorf("%s: listed %v, in the vault: %v", p, listed, err)
				}
			}
			if rep, err := v.Check(context.Background()); err != nil || !rep.OK {
				t.Fatalf("check: %+v %v", rep, err)
			}
		})
	}
}

// onLine is a writer that calls do once, from Write, when a line equal to
// line has been written to it.
type onLine struct {
	line string
	do   func()
	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (w *onLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && bytes.Contains(w.buf.Bytes(), []byte(w.line+"\n")) {
		w.done = true
		w.do()
	}
	return len(p), nil
}
