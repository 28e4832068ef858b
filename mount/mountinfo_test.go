package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

func TestParseMountinfo(t *testing.T) {
	cases := []struct {
		name string
		line string
		want Entry
		ok   bool
		avfs bool
	}{
		{
			name: "avfs mount",
			line: `812 29 0:98 / /tmp/run/root rw,nosuid,nodev,relatime shared:450 - fuse.avfs avfs:work rw,user_id=0,group_id=0,default_permissions`,
			want: Entry{Dir: "/tmp/run/root", FSType: "fuse.avfs", Source: "avfs:work", Minor: 98}, ok: true, avfs: true,
		},
		{
			name: "escaped spaces, tab, newline and backslash",
			line: `813 29 0:99 / /home/a\040b/my\011mnt\012x\134y rw - fuse avfs:my\040vault rw`,
			want: Entry{Dir: "/home/a b/my\tmnt\nx\\y", FSType: "fuse", Source: "avfs:my vault", Minor: 99}, ok: true, avfs: true,
		},
		{
			name: "several optional fields",
			line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 propagate_from:3 - fuse.avfs avfs:v rw`,
			want: Entry{Dir: "/mnt2", FSType: "fuse.avfs", Source: "avfs:v", Major: 98}, ok: true, avfs: true,
		},
		{
			name: "no optional fields",
			line: `25 1 0:22 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw`,
			want: Entry{Dir: "/dev/shm", FSType: "tmpfs", Source: "tmpfs", Minor: 22}, ok: true,
		},
		{
			name: "tmpfs whose source claims avfs",
			line: `26 1 0:23 / /x rw - tmpfs avfs:fake rw`,
			want: Entry{Dir: "/x", FSType: "tmpfs", Source: "avfs:fake", Minor: 23}, ok: true,
		},
		{
			name: "another FUSE file system",
			line: `27 1 0:24 / /y rw - fuse.sshfs host:/srv rw`,
			want: Entry{Dir: "/y", FSType: "fuse.sshfs", Source: "host:/srv", Minor: 24}, ok: true,
		},
		{
			name: "fuseblk is not a FUSE mount avfs makes",
			line: `28 1 8:1 / /z rw - fuseblk avfs:v rw`,
			want: Entry{Dir: "/z", FSType: "fuseblk", Source: "avfs:v", Major: 8, Minor: 1}, ok: true,
		},
		{
			name: "source avfs without the colon",
			line: `29 1 0:25 / /w rw - fuse.avfs avfs rw`,
			want: Entry{Dir: "/w", FSType: "fuse.avfs", Source: "avfs", Minor: 25}, ok: true,
		},
		{
			name: "a backslash without octal digits is kept",
			line: `30 1 0:26 / /a\b\04 rw - fuse avfs:\x rw`,
			want: Entry{Dir: `/a\b\04`, FSType: "fuse", Source: `avfs:\x`, Minor: 26}, ok: true, avfs: true,
		},
		{name: "no separator", line: `31 1 0:27 / /b rw fuse avfs:v rw`},
		{name: "truncated", line: `32 1 0:28 / /c`},
		{name: "empty", line: ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseMountinfoLine(tc.line)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parse %q: %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
			}
			if got.Avfs() != tc.avfs {
				t.Fatalf("avfs: %v, want %v", got.Avfs(), tc.avfs)
			}
		})
	}
	all, err := parseMountinfo(strings.NewReader(cases[0].line + "\n" + cases[len(cases)-2].line + "\n" + cases[1].line + "\n"))
	if err != nil || len(all) != 2 || all[1].Dir != cases[1].want.Dir {
		t.Fatalf("parse lines: %+v %v", all, err)
	}
}

// mountTmpfs mounts a tmpfs (with source as its source) at a new
// directory, unmounted at the end.
func mountTmpfs(t *testing.T, source string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(source, dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if IsMounted(dir) {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// TestIsAvfsMountAndUnmount checks which directories IsAvfsMount takes
// for avfs mounts, and that Unmount refuses every other one, leaving it
// mounted.
func TestIsAvfsMountAndUnmount(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		avfs bool
	}{
		{"plain directory", func(t *testing.T) string { return t.TempDir() }, false},
		{"tmpfs", func(t *testing.T) string { return mountTmpfs(t, "tmpfs") }, false},
		{"tmpfs whose source claims avfs", func(t *testing.T) string { return mountTmpfs(t, "avfs:fake") }, false},
		{"avfs mount", func(t *testing.T) string { return serve(t, false).dir }, true},
		{"avfs mount named through a symlink", func(t *testing.T) string {
			s := serve(t, false)
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(s.dir, link); err != nil {
				t.Fatal(err)
			}
			return link + "/"
		}, true},
		{"directory inside an avfs mount", func(t *testing.T) string {
			s := serve(t, false)
			if err := os.Mkdir(s.path("sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			return s.path("sub")
		}, false},
		{"dead avfs mount", func(t *testing.T) string {
			s := serve(t, false)
			s.cmd.Process.Kill()
			s.cmd.Wait()
			s.cmd = nil
			if _, err := os.ReadDir(s.dir); err == nil {
				t.Fatal("expected a dead mount after kill -9")
			}
			return s.dir
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			got, err := IsAvfsMount(dir)
			if err != nil || got != tc.avfs {
				t.Fatalf("IsAvfsMount(%s) = %v %v, want %v", dir, got, err, tc.avfs)
			}
			resolved, _ := mountDir(dir)
			before := IsMounted(resolved)
			err = Unmount(dir, false)
			if !tc.avfs {
				if !wire.HasCode(err, wire.CodeNotMounted) {
					t.Fatalf("Unmount(%s): %v, want not_mounted", dir, err)
				}
				if IsMounted(resolved) != before {
					t.Fatalf("Unmount(%s) changed the mount table", dir)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmount(%s): %v", dir, err)
			}
			if IsMounted(resolved) {
				t.Fatalf("%s still mounted", dir)
			}
		})
	}
}
