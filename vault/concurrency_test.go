package vault

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as a second process on a vault.
func TestMain(m *testing.M) {
	switch os.Getenv("AVFS_VAULT_CHILD") {
	case "":
		os.Exit(m.Run())
	case "writer":
		childWriter()
	case "restorer":
		childRestorer()
	case "fsize":
		childFileSizeLimit()
	case "fork":
		childFork()
	case "stager":
		childStager()
	}
}

func childWriter() {
	ctx := context.Background()
	v, err := Open(ctx, os.Getenv("AVFS_VAULT_PATH"), Options{Actor: "child"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	id := os.Getenv("AVFS_CHILD_ID")
	n, _ := strconv.Atoi(os.Getenv("AVFS_CHILD_N"))
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("/p%s/f%d", id, i)
		if _, err := v.WriteFile(ctx, p, strings.NewReader(p), WriteOptions{Parents: true}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		if _, err := v.WriteFile(ctx, "/shared.log", strings.NewReader(p+"\n"), WriteOptions{Append: true}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(5)
		}
	}
	v.Close()
	os.Exit(0)
}

// childRestorer restores checkpoints back and forth until killed.
func childRestorer() {
	ctx := context.Background()
	v, err := Open(ctx, os.Getenv("AVFS_VAULT_PATH"), Options{Actor: "child"})
	if err != nil {
		os.Exit(3)
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		ref := "a"
		if i%2 == 1 {
			ref = "b"
		}
		if _, err := v.RestoreCheckpoint(ctx, ref); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
	}
}

func TestConcurrentGoroutineWriters(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				p := fmt.Sprintf("/g%d/f%d", w, i)
				if _, err := v.WriteFile(ctx, p, strings.NewReader(p), WriteOptions{Parents: true}); err != nil {
					errs <- err
					return
				}
				if _, err := v.WriteFile(ctx, "/shared.log", strings.NewReader(p+"\n"), WriteOptions{Append: true}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if lines := strings.Count(read(t, v, "/shared.log"), "\n"); lines != writers*each {
		t.Fatalf("shared log has %d lines, want %d (lost appends)", lines, writers*each)
	}
	mustCheck(t, v)
}

func TestConcurrentProcessWriters(t *testing.T) {
	_, v := newVault(t)
	const procs, each = 4, 30
	var cmds []*exec.Cmd
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AVFS_VAULT_CHILD=writer", "AVFS_VAULT_PATH="+v.Path(),
			"AVFS_CHILD_ID="+strconv.Itoa(p), "AVFS_CHILD_N="+strconv.Itoa(each))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if stderr.Len() > 0 {
				t.Logf("child stderr: %s", stderr.String())
			}
		})
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	if lines := strings.Count(read(t, v, "/shared.log"), "\n"); lines != procs*each {
		t.Fatalf("shared log has %d lines, want %d", lines, procs*each)
	}
	for p := 0; p < procs; p++ {
		if got := read(t, v, fmt.Sprintf("/p%d/f%d", p, each-1)); got != fmt.Sprintf("/p%d/f%d", p, each-1) {
			t.Fatalf("content %q", got)
		}
	}
	mustCheck(t, v)
}

// TestRestoreSurvivesKill kills a process in the middle of restoring and
// checks that the vault is intact and in one of the two saved states.
func TestRestoreSurvivesKill(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	for i := 0; i < 200; i++ {
		write(t, v, fmt.Sprintf("/d/%03d", i), "a")
	}
	if _, err := v.SaveCheckpoint(ctx, "a", ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		write(t, v, fmt.Sprintf("/d/%03d", i), "bb")
	}
	write(t, v, "/only-b", "b")
	if _, err := v.SaveCheckpoint(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 5; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AVFS_VAULT_CHILD=restorer", "AVFS_VAULT_PATH="+v.Path())
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		_, _ = out.Read(buf)
		time.Sleep(time.Duration(20+round*37) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		mustCheck(t, v)
		first := read(t, v, "/d/000")
		for i := 0; i < 200; i++ {
			if got := read(t, v, fmt.Sprintf("/d/%03d", i)); got != first {
				t.Fatalf("round %d: mixed state: /d/000=%q /d/%03d=%q", round, first, i, got)
			}
		}
		_, err := v.Stat(ctx, "/only-b")
		if (first == "bb") != (err == nil) {
			t.Fatalf("round %d: /only-b presence does not match state %q", round, first)
		}
	}
}
