package sandbox

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"avfs/wire"
)

// Spec is one command to hold in a sandbox, and the view it gets.
type Spec struct {
	// Argv is the command; Argv[0] is looked up on the PATH of Env inside
	// the view, as execvp does.
	Argv []string
	// Env is the command's whole environment.
	Env []string
	// Dir is the working directory, a path in the view (/workspace/src).
	Dir string
	// Root is an empty host directory private to the run (mode 0700, in
	// avfs's run directory): the view is built on a tmpfs mounted there in
	// the run's own mount namespace, so the host never sees it.
	Root string
	// Workspace is the host directory of the vault (its FUSE mount or
	// materialised copy), shown at WorkspaceAt as it is: a read-only
	// mount stays read-only, and a --readonly run's copy stays writable,
	// its changes discarded and counted as without a sandbox.
	Workspace, WorkspaceAt string
	// Home is HOME in the view: a private tmpfs holding HomeFiles (host
	// paths, bound read-only at the same place relative to HostHome) and
	// Cache (a host directory bound read-write at Home/.cache; "" none).
	Home, HostHome string
	HomeFiles      []string
	Cache          string
	// Toolchains are host directories bound read-only at the same paths
	// (see Toolchains).
	Toolchains []string
	// Network is the grant: NetworkHost keeps the host's network; anything
	// else gives the run a network namespace with loopback only.
	Network wire.Network
	// UID and GID are the identity the command keeps: its user namespace
	// maps exactly these, so files it writes are the invoking user's.
	UID, GID int
	// User and Group name them in the view's /etc/passwd and /etc/group.
	User, Group string
	// GitName and GitEmail are the identity git falls back to in the view
	// (/etc/gitconfig; the user's own ~/.gitconfig, when bound, wins).
	GitName, GitEmail string
	// TmpSize caps /tmp, the home and /dev/shm, each (bytes).
	TmpSize int64
	// KillGrace is how long processes the command leaves behind get
	// between SIGTERM and SIGKILL when it exits.
	KillGrace time.Duration
}

// etcFiles are what the view's /etc shows of the host's, read-only: what
// git, python, node, go, gcc, make and their TLS and DNS look for. Never
// shadow, sudoers or ssh host keys. passwd, group, hostname and gitconfig
// are written for the run instead (see etcWritten).
var etcFiles = []string{
	"hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "services", "protocols", "networks",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "os-release", "debian_version", "lsb-release",
	"mime.types", "magic", "inputrc", "bash.bashrc", "profile", "profile.d", "environment",
	"login.defs", "shells", "manpath.config", "xdg",
	"python3", "python3.11", "perl", "npmrc", "gitattributes", "gcrypt", "gnutls",
	"java-17-openjdk", "subversion", "wgetrc", "curlrc",
}

// devFiles are the host device nodes the view's /dev shows.
var devFiles = []string{"null", "zero", "full", "random", "urandom", "tty"}

// plan writes the records init.c carries out, in order (see the protocol
// there). Everything the view holds is decided here; the init only does
// it.
func (s *Spec) plan() ([]byte, error) {
	b := s.view(s.Root)
	if b.err != nil {
		return nil, b.err
	}
	b.add("bind", s.Workspace, s.WorkspaceAt, "")
	b.seal()
	s.command(b)
	return b.buf.Bytes(), b.err
}

// prepared writes the records a prepared sandbox carries out ahead of its
// run (see Pool): the view of plan without the workspace, whose mount
// point it makes, sealed, and a wait for the rest. Sealing before the wait
// matters: until its pivot the init's mount namespace holds a copy of
// every host mount made before it, the FUSE mounts of runs under way
// among them, and a copy keeps a FUSE file system alive after its
// unmount.
func (s *Spec) prepared(root string) *planBuilder {
	b := s.view(root)
	b.add("dir", s.WorkspaceAt, "0755")
	b.seal()
	b.add("await")
	return b
}

// rest writes the records a prepared sandbox gets from its run: the
// workspace, attached from the first tree sent with them, and the command.
func (s *Spec) rest() *planBuilder {
	var b planBuilder
	b.add("attach", "0", s.WorkspaceAt)
	s.command(&b)
	return &b
}

// view writes the records of the part of the view that does not depend on
// the run (a prepared sandbox builds it ahead), on a tmpfs at root: all
// but the workspace, the command and what must come after them.
func (s *Spec) view(root string) *planBuilder {
	var b planBuilder
	b.add("root", root)
	for _, d := range SystemDirs {
		b.system(d)
	}
	// /etc: a tmpfs of chosen entries, then read-only.
	b.add("tmpfs", "/etc", "0755", "size=4m")
	for _, name := range etcFiles {
		b.system(filepath.Join("/etc", name))
	}
	written := s.etcWritten()
	for _, name := range slices.Sorted(maps.Keys(written)) { // in order: a prepared view is found by its plan
		b.add("file", "/etc/"+name, "0644", written[name])
	}
	b.add("ro", "/etc")
	// /dev: the harmless devices, a pts of its own, shared memory.
	b.add("tmpfs", "/dev", "0755", "size=64k")
	for _, d := range devFiles {
		b.add("bind", "/dev/"+d, "/dev/"+d, "vo")
	}
	b.add("devpts", "/dev/pts")
	b.add("symlink", "pts/ptmx", "/dev/ptmx")
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		b.add("symlink", "/proc/self/fd/"+strconv.Itoa(i), "/dev/"+name)
	}
	b.add("symlink", "/proc/self/fd", "/dev/fd")
	b.add("tmpfs", "/dev/shm", "1777", sizeOpt(s.TmpSize))
	b.add("ro", "/dev")
	b.add("proc", "/proc")
	b.add("tmpfs", "/tmp", "1777", sizeOpt(s.TmpSize))
	b.add("tmpfs", "/run", "0755", "size=1m")
	// The home, with what the user chose to show, and the cache.
	b.add("tmpfs", s.Home, "0700", sizeOpt(s.TmpSize))
	for _, f := range s.HomeFiles {
		rel, err := filepath.Rel(s.HostHome, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			b.err = wire.Errorf(wire.CodeInvalidInput, "sandbox: home file %s is not in %s", f, s.HostHome)
			return &b
		}
		b.add("bind", f, filepath.Join(s.Home, rel), "ro")
	}
	if s.Cache != "" {
		b.add("bind", s.Cache, filepath.Join(s.Home, ".cache"), "")
	}
	for _, d := range s.Toolchains {
		b.add("bind", d, d, "ro")
	}
	b.add("hostname", "avfs")
	if s.Network != wire.NetworkHost {
		b.add("lo")
	}
	return &b
}

// seal makes the view's root read-only and pivots into it: what the
// host's mount table held is gone from the namespace.
func (b *planBuilder) seal() {
	b.add("ro", "/")
	b.add("pivot")
}

// command writes the records that follow the view: the working
// directory, Landlock, and the command.
func (s *Spec) command(b *planBuilder) {
	b.add("chdir", s.Dir)
	net := "deny"
	if s.Network == wire.NetworkHost {
		net = "allow"
	}
	b.add("landlock", net, s.WorkspaceAt, "/tmp", s.Home, "/dev/shm", "/proc", "/run", "--", "/dev")
	b.add("grace", strconv.FormatInt(s.KillGrace.Milliseconds(), 10))
	for _, kv := range s.Env {
		b.add("env", kv)
	}
	b.add(append([]string{"exec"}, s.Argv...)...)
}

// etcWritten are the /etc files written for the run: only its own user
// and group, and git's fallback identity.
func (s *Spec) etcWritten() map[string]string {
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	group := "root:x:0:\n"
	if s.UID != 0 {
		passwd += fmt.Sprintf("%s:x:%d:%d:%s:%s:/bin/sh\n", s.User, s.UID, s.GID, s.User, s.Home)
	} else {
		passwd = fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\n", s.Home)
	}
	if s.GID != 0 {
		group += fmt.Sprintf("%s:x:%d:\n", s.Group, s.GID)
	}
	passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	git := fmt.Sprintf("[user]\n\tname = %s\n\temail = %s\n[safe]\n\tdirectory = *\n", gitQuote(s.GitName), gitQuote(s.GitEmail))
	return map[string]string{"passwd": passwd, "group": group, "hostname": "avfs\n", "gitconfig": git}
}

// gitQuote quotes a value for a git config file.
func gitQuote(v string) string {
	v = strings.NewReplacer("\\", "\\\\", "\"", "\\\"", "\n", " ").Replace(v)
	return "\"" + v + "\""
}

func sizeOpt(n int64) string {
	if n <= 0 {
		return ""
	}
	return "size=" + strconv.FormatInt(n, 10)
}

// planBuilder writes plan records. A bind's flags are letters: r
// read-only, o optional (a missing source is skipped), v devices allowed
// (every bind is nosuid, and nodev without v).
type planBuilder struct {
	buf bytes.Buffer
	err error
}

func (b *planBuilder) add(fields ...string) {
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 && b.err == nil {
			b.err = wire.Errorf(wire.CodeInvalidInput, "sandbox: NUL byte in %q", fields[0])
		}
	}
	b.buf.WriteString(strconv.Itoa(len(fields)))
	b.buf.WriteByte(0)
	for _, f := range fields {
		b.buf.WriteString(f)
		b.buf.WriteByte(0)
	}
}

// system shows the host's path p read-only at the same place: a symlink
// as the same symlink when what it names is in the view too (/bin ->
// usr/bin, /etc/localtime), else what it names; a missing one not at all.
func (b *planBuilder) system(p string) {
	fi, err := os.Lstat(p)
	if err != nil {
		return
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err == nil && inSystem(resolveLink(p, target)) {
			b.add("symlink", target, p)
			return
		}
	}
	b.add("bind", p, p, "ro")
}

// resolveLink is where the symlink at p pointing to target lands,
// lexically.
func resolveLink(p, target string) string {
	if filepath.IsAbs(target) {
		return filepath.Clean(target)
	}
	return filepath.Join(filepath.Dir(p), target)
}

// inSystem reports whether p is under one of SystemDirs.
func inSystem(p string) bool {
	for _, d := range SystemDirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// under reports whether p is dir or beneath it (both clean and absolute).
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
