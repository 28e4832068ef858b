package mount

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// need fails in CI and skips elsewhere when a tool is missing.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI (make deps installs it)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
}

// run runs a shell script in dir and fails the test on error.
func run(t *testing.T, dir, script string, env ...string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s\n%s\n%v", script, out, err)
	}
	return string(out)
}

// sameTree compares two host trees byte for byte, mode for mode, link for link.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		q := filepath.Join(b, rel)
		fa, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fb, err := os.Lstat(q)
		if err != nil {
			return fmt.Errorf("%s missing: %w", rel, err)
		}
		if fa.Mode() != fb.Mode() {
			return fmt.Errorf("%s: mode %v vs %v", rel, fa.Mode(), fb.Mode())
		}
		switch {
		case fa.Mode()&fs.ModeSymlink != 0:
			ta, _ := os.Readlink(p)
			tb, _ := os.Readlink(q)
			if ta != tb {
				return fmt.Errorf("%s: link %q vs %q", rel, ta, tb)
			}
		case fa.Mode().IsRegular():
			ba, _ := os.ReadFile(p)
			bb, _ := os.ReadFile(q)
			if !bytes.Equal(ba, bb) {
				return fmt.Errorf("%s: content differs", rel)
			}
			if !fa.ModTime().Equal(fb.ModTime()) {
				return fmt.Errorf("%s: mtime %v vs %v", rel, fa.ModTime(), fb.ModTime())
			}
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 2 {
		t.Fatalf("compared only %d entries", seen)
	}
}

// exportVault copies the vault's tree at p to a fresh host directory.
func exportVault(t *testing.T, s *served, p string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "export")
	if _, err := s.v.Export(context.Background(), p, dst, false); err != nil {
		t.Fatal(err)
	}
	return dst
}

// makeTree writes a small realistic tree on the host.
func makeTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	run(t, "/", fmt.Sprintf(`mkdir -p %[1]s/a/b/c %[1]s/bin
		for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom > %[1]s/a/f$i; done
		head -c 300000 /dev/urandom > %[1]s/a/b/c/big
		printf '#!/bin/sh\necho hi\n' > %[1]s/bin/tool && chmod 755 %[1]s/bin/tool
		chmod 600 %[1]s/a/f1; chmod 2750 %[1]s/a/b
		ln -s ../bin/tool %[1]s/a/tool-link; ln -s /nonexistent %[1]s/a/dangling`, src))
	return src
}

func TestWorkloads(t *testing.T) {
	s := serve(t, false)
	mnt := s.dir

	t.Run("git", func(t *testing.T) {
		need(t, "git")
		dir := filepath.Join(mnt, "repo")
		os.Mkdir(dir, 0o755)
		run(t, dir, `git init -q -b main .
			git config user.email t@example.com && git config user.name T
			for i in $(seq 1 50); do echo "line $i" > file$i.txt; done
			git add . && git commit -qm first
			git checkout -qb feature && echo change >> file1.txt && git commit -qam second
			git checkout -q main && git merge -q --no-edit feature
			git log --oneline | wc -l | grep -q 2
			git gc -q && git fsck --no-progress
			git status --porcelain | wc -l | grep -q '^0$'`)
	})
	t.Run("python", func(t *testing.T) {
		need(t, "python3")
		dir := filepath.Join(mnt, "py")
		os.Mkdir(dir, 0o755)
		run(t, dir, `python3 - <<'PY'
import os
for i in range(20):
    with open(f"tmp{i}", "w") as f:
        f.write("x" * (i * 1000))
        f.flush(); os.fsync(f.fileno())
    os.rename(f"tmp{i}", f"final{i}")
with open("final5", "r+b") as f:
    f.seek(100); f.write(b"PATCH"); f.truncate(2000)
assert os.path.getsize("final5") == 2000
assert sorted(os.listdir("."))[0] == "final0"
PY`)
	})
	t.Run("script", func(t *testing.T) {
		dir := filepath.Join(mnt, "sh")
		os.Mkdir(dir, 0o755)
		out := run(t, dir, `printf '#!/bin/sh\necho "args: $*"\n' > run.sh && chmod +x run.sh && ./run.sh a b`)
		if out != "args: a b\n" {
			t.Fatalf("%q", out)
		}
	})
	t.Run("tar", func(t *testing.T) {
		need(t, "tar")
		src := makeTree(t)
		out := filepath.Join(t.TempDir(), "out")
		os.Mkdir(out, 0o755)
		dir := filepath.Join(mnt, "tar")
		os.Mkdir(dir, 0o755)
		run(t, dir, fmt.Sprintf(`tar --format=posix -C %s -cpf - . | tar -xpf -
			tar --format=posix -cpf ../tree.tar . && tar -C %s -xpf ../tree.tar`, src, out))
		sameTree(t, src, out)
		sameTree(t, src, dir)
	})
	t.Run("cp-a", func(t *testing.T) {
		src := makeTree(t)
		dst := filepath.Join(mnt, "copy")
		run(t, "/", fmt.Sprintf("cp -a %s %s", src, dst))
		sameTree(t, src, dst)
		back := filepath.Join(t.TempDir(), "back")
		run(t, "/", fmt.Sprintf("cp -a %s %s", dst, back))
		sameTree(t, src, back)
	})
	t.Run("sqlite-wal", func(t *testing.T) {
		need(t, "sqlite3")
		dir := filepath.Join(mnt, "db")
		os.Mkdir(dir, 0o755)
		out := run(t, dir, `sqlite3 t.db 'PRAGMA journal_mode=WAL;' 'CREATE TABLE t(x);' \
			"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 5000) INSERT INTO t SELECT i FROM n;" \
			'SELECT count(*), sum(x) FROM t;' 'PRAGMA integrity_check;'`)
		if !strings.Contains(out, "5000|12502500") || !strings.Contains(out, "ok") {
			t.Fatalf("%s", out)
		}
	})
	t.Run("go-build", func(t *testing.T) {
		need(t, "go")
		dir := filepath.Join(mnt, "gomod")
		os.Mkdir(dir, 0o755)
		out := run(t, dir, `go mod init example.com/hello >/dev/null 2>&1
			printf 'package main\nimport "fmt"\nfunc main() { fmt.Println("built in a vault") }\n' > main.go
			go build -o hello . && ./hello`, "GOFLAGS=-mod=mod", "GO111MODULE=on", "GOTOOLCHAIN=local")
		if out != "built in a vault\n" {
			t.Fatalf("%q", out)
		}
	})
	t.Run("rm-rf-deep", func(t *testing.T) {
		dir := filepath.Join(mnt, "deep")
		deep := dir
		for i := 0; i < 30; i++ {
			deep = filepath.Join(deep, fmt.Sprintf("d%d", i))
		}
		run(t, "/", fmt.Sprintf(`mkdir -p %s && for i in $(seq 1 200); do echo $i > %s/../f$i; done && rm -rf %s`, deep, deep, dir))
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("rm -rf left %v", err)
		}
	})

	// After unmount the vault holds exactly what was written.
	s.stop()
	s.mustCheck()
	ctx := context.Background()
	if _, err := s.v.Stat(ctx, "/deep"); err == nil {
		t.Fatal("/deep still in the vault")
	}
	repo := exportVault(t, s, "/repo")
	if _, err := exec.LookPath("git"); err == nil {
		out := run(t, repo, "git log --oneline | wc -l && git fsck --no-progress && git status --porcelain")
		if strings.TrimSpace(out) != "2" {
			t.Fatalf("exported repository: %q", out)
		}
	}
	if _, err := s.v.Stat(ctx, "/copy/a/b/c/big"); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.v.Stat(ctx, "/py/final5"); e.Size != 2000 {
		t.Fatalf("py/final5 size %d", e.Size)
	}
	if e, _ := s.v.Stat(ctx, "/gomod/hello"); e.Mode&0o111 == 0 {
		t.Fatalf("built binary not executable: %o", e.Mode)
	}
}
