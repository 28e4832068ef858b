package vault

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// fileIno returns the inode number of /name.
func fileIno(t *testing.T, v *Vault, name string) uint64 {
	t.Helper()
	a, err := v.Lookup(context.Background(), RootIno, name)
	if err != nil {
		t.Fatal(err)
	}
	return a.Ino
}

// stage stages data for owner at epoch and returns its hash.
func stage(t *testing.T, v *Vault, owner StageOwner, epoch int64, data []byte) []byte {
	t.Helper()
	c := []StagedChunk{{Owner: owner, Epoch: epoch, Data: data}}
	if err := v.StageChunks(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c[0].Hash
}

// commitStaged commits hash as the whole content (size bytes) of ino,
// releasing owner's rows up to epoch.
func commitStaged(t *testing.T, v *Vault, ino uint64, size int64, hash []byte, owner StageOwner, epoch int64) {
	t.Helper()
	_, err := v.PersistStaged(context.Background(), ino, FileCommit{Size: size, Indexes: []int64{0},
		Chunk: func(int64) (Chunk, error) { return Chunk{Hash: hash}, nil }, Owner: owner, Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
}

// A staged chunk that shares its hash with a chunk only removed history
// refers to survives the pass that frees that history's chunks, and
// commits.
func TestStagedChunkSurvivesRetentionAndGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		free func(t *testing.T, v *Vault) int64 // frees /a's old content, returns the chunks freed
	}{
		{"retention", func(t *testing.T, v *Vault) int64 {
			one := int64(1)
			if _, err := v.SetRetention(context.Background(), RetentionChange{Versions: &one}); err != nil {
				t.Fatal(err)
			}
			res, err := v.Retain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return res.Chunks
		}},
		{"gc", func(t *testing.T, v *Vault) int64 {
			if _, err := v.Prune(context.Background(), PruneOptions{Keep: 1}); err != nil {
				t.Fatal(err)
			}
			res, err := v.GC(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return res.Chunks
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			_, v := newVault(t)
			old, other := randBytes(ChunkSize), randBytes(ChunkSize)
			for _, c := range [][]byte{old, other} {
				if _, err := v.WriteFile(ctx, "/a", bytes.NewReader(c), WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			write(t, v, "/a", "small")
			write(t, v, "/b", "")
			owner := NewStageOwner()
			h := stage(t, v, owner, 0, old) // stored already: only the staged row is new
			if n, err := v.StagedCount(ctx); err != nil || n != 1 {
				t.Fatalf("staged rows %d %v", n, err)
			}
			if freed := tc.free(t, v); freed != 1 {
				t.Fatalf("freed %d chunks, want 1 (other's, not the staged one)", freed)
			}
			got, err := v.ChunkByHash(ctx, h)
			if err != nil || !bytes.Equal(got, old) {
				t.Fatalf("staged chunk after %s: %v", tc.name, err)
			}
			commitStaged(t, v, fileIno(t, v, "b"), ChunkSize, h, owner, 0)
			if read(t, v, "/b") != string(old) {
				t.Fatal("/b is not the staged chunk")
			}
			if n, _ := v.StagedCount(ctx); n != 0 {
				t.Fatalf("%d staged rows after the commit", n)
			}
			mustCheck(t, v)
		})
	}
}

// A commit releases its owner's rows up to its epoch, not those staged
// after it began, nor other owners'; ReleaseStaged releases the rest;
// a chunk of zeros is never stored.
func TestStageRelease(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/b", "")
	a, b := NewStageOwner(), NewStageOwner()
	first := randBytes(ChunkSize)
	h := stage(t, v, a, 0, first)
	stage(t, v, a, 1, randBytes(100))
	stage(t, v, b, 0, randBytes(100))
	if z := stage(t, v, a, 1, make([]byte, ChunkSize)); !bytes.Equal(z, zeroHash) {
		t.Fatalf("zeros staged as %x", z)
	}
	count := func(want int64) {
		t.Helper()
		if n, err := v.StagedCount(ctx); err != nil || n != want {
			t.Fatalf("staged rows %d %v, want %d", n, err, want)
		}
	}
	count(3)
	commitStaged(t, v, fileIno(t, v, "b"), ChunkSize, h, a, 0)
	count(2)
	if err := v.ReleaseStaged(ctx, a); err != nil {
		t.Fatal(err)
	}
	count(1)
	if err := v.Lock(ctx, LockMount, "test"); err != nil {
		t.Fatal(err)
	}
	if err := v.Unlock(ctx, LockMount); err != nil {
		t.Fatal(err)
	}
	count(0) // the mount's end releases the process's rows
	if read(t, v, "/b") != string(first) {
		t.Fatal("/b")
	}
	mustCheck(t, v)
}

// childStager commits one chunk of AVFS_VAULT_PATH's /f (flushed), stages
// a second (not flushed), prints "staged" and waits to be killed.
func childStager() {
	ctx := context.Background()
	v, err := Open(ctx, os.Getenv("AVFS_VAULT_PATH"), Options{Actor: "child"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if err := v.Lock(ctx, LockMount, "child"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	owner := NewStageOwner()
	a, err := v.Lookup(ctx, RootIno, "f")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	flushed := []StagedChunk{{Owner: owner, Data: bytes.Repeat([]byte("F"), ChunkSize)}}
	if err := v.StageChunks(ctx, flushed); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if _, err := v.PersistStaged(ctx, a.Ino, FileCommit{Size: ChunkSize, Indexes: []int64{0}, Owner: owner,
		Chunk: func(int64) (Chunk, error) { return Chunk{Hash: flushed[0].Hash}, nil }}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if err := v.StageChunks(ctx, []StagedChunk{{Owner: owner, Epoch: 1, Data: bytes.Repeat([]byte("U"), ChunkSize)}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("staged")
	select {}
}

// A writer killed (SIGKILL) between staging and committing leaves what it
// committed, a clean vault, and staged rows that the next writer mount's
// lock sweeps away; gc then frees the chunk it never committed.
func TestStagerKilled(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/f", "")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "AVFS_VAULT_CHILD=stager", "AVFS_VAULT_PATH="+v.Path())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if line != "staged\n" {
		t.Fatalf("child: %q", line)
	}
	if got := read(t, v, "/f"); got != string(bytes.Repeat([]byte("F"), ChunkSize)) {
		t.Fatalf("/f after the kill: %d bytes", len(got))
	}
	mustCheck(t, v)
	if n, _ := v.StagedCount(ctx); n != 1 {
		t.Fatalf("%d staged rows left by the killed writer, want 1", n)
	}
	// A dead writer's rows protect nothing: gc frees its chunk, and sweeps them.
	res, err := v.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks != 1 {
		t.Fatalf("gc freed %d chunks, want the uncommitted one", res.Chunks)
	}
	if n, _ := v.StagedCount(ctx); n != 0 {
		t.Fatalf("%d staged rows after gc", n)
	}
	mustCheck(t, v)
}

// The next writer mount's lock sweeps a dead writer's rows.
func TestLockSweepsDeadStaged(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.db.ExecContext(ctx, "INSERT INTO staged (pid, host, owner, epoch, hash) VALUES (?, ?, 1, 0, ?), (?, ?, 1, 0, ?)",
		dead.Process.Pid, hostname(), randBytes(32), os.Getpid(), hostname(), randBytes(32)); err != nil {
		t.Fatal(err)
	}
	if err := v.Lock(ctx, LockMount, "test"); err != nil {
		t.Fatal(err)
	}
	if n, _ := v.StagedCount(ctx); n != 1 {
		t.Fatalf("%d staged rows after the lock, want this process's 1", n)
	}
}

// A vault of schema version 3 opens as the current version, and stages.
func TestOpenMigratesSchemaV3(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	write(t, v, "/a", "1")
	v.Close()
	schemaV3(t, s.PathOf("t"))
	v, err := s.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var ver int
	if err := v.rdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&ver); err != nil || ver != schemaVersion {
		t.Fatalf("schema version %d %v", ver, err)
	}
	stage(t, v, NewStageOwner(), 0, []byte("x"))
	if read(t, v, "/a") != "1" {
		t.Fatal("/a")
	}
	mustCheck(t, v)
}
