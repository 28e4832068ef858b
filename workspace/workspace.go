// Package workspace keeps the records of avfs's workspaces: project
// directories on the host that are mounted as their vault (`avfs workspace
// up DIR`), so that an agent harness's own file tools, which write in the
// project directory, and the commands avfs runs for it see one tree at one
// path.
//
// Two kinds of record live under $AVFS_HOME:
//
//   - a binding, workspaces/<id>.json: this directory is that vault. It
//     outlives the mount (a workspace that is down is still bound: its
//     vault, not the directory beneath, holds the agent's work) until
//     Unbind;
//   - a live record, run/workspaces/<id>.json, with the lock
//     run/workspaces/<id>.lock and the socket run/workspaces/<id>.sock of
//     the avfs process that serves the mount (`avfs workspace serve`). The
//     workspace is up while that process holds an exclusive flock on the
//     lock file: the kernel drops it when the process dies, however it
//     dies, so a record is never trusted on its own (a pid proves
//     nothing).
//
// id is derived from the directory's absolute path, never read from a
// record, and so is the socket's path: a record cannot point avfs at
// another socket. Records are read without following symlinks, only when
// they are regular files of avfs's user, in directories of mode 0700: no
// other user can plant one. The process that serves a workspace is
// avfs's user's; a command avfs runs without a sandbox runs as that user
// too and could rewrite these records, as it could the vaults — the
// sandbox keeps $AVFS_HOME out of its view.
package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// Binding says that a project directory is a vault.
type Binding struct {
	Dir     string    `json:"dir"`   // absolute, clean
	Vault   string    `json:"vault"` // the vault's name
	BoundAt time.Time `json:"bound_at"`
}

// Live is the record of the process that serves a workspace.
type Live struct {
	Dir       string    `json:"dir"`
	Vault     string    `json:"vault"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// Socket is where its avfs answers the serve API (derived from Dir:
	// see Registry.Socket; the record's copy is informative only).
	Socket string `json:"socket"`
}

// Registry is the workspace records of one $AVFS_HOME.
type Registry struct {
	Home string
}

// maxRecord bounds a record read.
const maxRecord = 64 << 10

// ID is the identifier of the workspace at dir (absolute and clean): the
// first 16 hex digits of its path's SHA-256.
func ID(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:8])
}

func (r Registry) bindDir() string { return filepath.Join(r.Home, "workspaces") }
func (r Registry) liveDir() string { return filepath.Join(r.Home, "run", "workspaces") }

// Socket is where the avfs serving the workspace at dir answers.
func (r Registry) Socket(dir string) string { return filepath.Join(r.liveDir(), ID(dir)+".sock") }

// Log is where the avfs serving the workspace at dir writes its log.
func (r Registry) Log(dir string) string { return filepath.Join(r.liveDir(), ID(dir)+".log") }

// Clean makes dir absolute and clean, with its symlinks resolved (the
// mount is made at the real directory; a harness may name it through a
// link). A directory that does not exist is an invalid_input error.
func Clean(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", wire.Errorf(wire.CodeInvalidInput, "workspace: %v", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", wire.Errorf(wire.CodeInvalidInput, "workspace: %s: %v", dir, err).With("dir", dir)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", wire.Errorf(wire.CodeInvalidInput, "workspace: %s is not a directory", dir).With("dir", dir)
	}
	return real, nil
}

// system are directories a workspace may be neither in nor above: the
// sandbox shows them as the system (read-only) or as the run's own, and a
// mount there would hide the host's. roomy are directories a workspace may
// be inside but neither be nor be above: a project in /tmp/x or /var/www/x
// is shown in the sandbox at its path, over the sandbox's own /tmp.
var (
	system = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc", "/dev", "/proc", "/sys", "/run", "/boot"}
	roomy  = []string{"/tmp", "/var", "/home", "/root"}
)

// Check refuses a directory (absolute, clean) that cannot be a workspace:
// the root, a system directory or one inside it, one above any of them, a
// roomy directory itself (/tmp, /home) or one above it, the home directory
// itself (a sandbox shows a private home there) or one above it, and one
// that holds avfs's own state (the vault would be served from inside its
// own mount).
func Check(dir, home, avfsHome string) error {
	bad := func(why string) error {
		return wire.Errorf(wire.CodeInvalidInput, "workspace: %s cannot be a workspace: %s", dir, why).With("dir", dir)
	}
	if dir == "/" {
		return bad("it is the root")
	}
	within := func(p, d string) bool { return p == d || strings.HasPrefix(p, d+"/") }
	for _, d := range system {
		if within(dir, d) || within(d, dir) {
			return bad(d + " is the system's, or a sandbox's own")
		}
	}
	for _, d := range roomy {
		if within(d, dir) {
			return bad("it is (or holds) " + d)
		}
	}
	if home != "" && within(filepath.Clean(home), dir) {
		return bad("it is (or holds) the home directory, which a sandbox shows as a private directory")
	}
	if avfsHome != "" {
		if real, err := filepath.EvalSymlinks(avfsHome); err == nil {
			avfsHome = real
		}
		if within(filepath.Clean(avfsHome), dir) {
			return bad("it holds avfs's state (" + avfsHome + "): the vault would be inside its own mount")
		}
	}
	return nil
}

// Bind records that dir is vault. A binding to another vault is refused
// (already_exists): a directory is one vault until Unbind.
func (r Registry) Bind(dir, vault string, now time.Time) (Binding, error) {
	if b, ok, err := r.Binding(dir); err != nil {
		return Binding{}, err
	} else if ok {
		if b.Vault != vault {
			return Binding{}, wire.Errorf(wire.CodeAlreadyExists, "workspace: %s is bound to vault %s, not %s (avfs workspace down %s --forget first)", dir, b.Vault, vault, dir).
				With("dir", dir).With("vault", b.Vault)
		}
		return b, nil
	}
	if err := ensureDir(r.bindDir()); err != nil {
		return Binding{}, err
	}
	b := Binding{Dir: dir, Vault: vault, BoundAt: now.UTC()}
	return b, writeRecord(r.bindDir(), ID(dir)+".json", b)
}

// Binding returns the binding of dir, if any.
func (r Registry) Binding(dir string) (Binding, bool, error) {
	var b Binding
	ok, err := readRecord(r.bindDir(), ID(dir)+".json", &b)
	if err != nil || !ok || b.Dir != dir {
		return Binding{}, false, err
	}
	return b, true, nil
}

// Unbind removes the binding of dir (none is not an error).
func (r Registry) Unbind(dir string) error {
	err := os.Remove(filepath.Join(r.bindDir(), ID(dir)+".json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	return nil
}

// Bindings lists every binding, by directory.
func (r Registry) Bindings() ([]Binding, error) {
	ents, err := os.ReadDir(r.bindDir())
	if errors.Is(err, fs.ErrNotExist) {
		return []Binding{}, nil
	}
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	out := []Binding{}
	for _, e := range ents {
		var b Binding
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if ok, err := readRecord(r.bindDir(), e.Name(), &b); err == nil && ok && e.Name() == ID(b.Dir)+".json" {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// Find returns the binding of the workspace that holds path (absolute):
// the one with the longest directory that is path or above it.
func (r Registry) Find(path string) (Binding, bool, error) {
	path = filepath.Clean(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	for p := path; ; p = filepath.Dir(p) {
		b, ok, err := r.Binding(p)
		if err != nil || ok {
			return b, ok, err
		}
		if p == "/" || p == "." {
			return Binding{}, false, nil
		}
	}
}

// Live returns the record of the process serving the workspace at dir
// when one is alive (it holds the lock), else nil.
func (r Registry) Live(dir string) (*Live, error) {
	var l Live
	ok, err := readRecord(r.liveDir(), ID(dir)+".json", &l)
	if err != nil || !ok || l.Dir != dir {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(r.liveDir(), ID(dir)+".lock"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return nil, nil // nobody holds it: the process is gone
	case errors.Is(err, unix.EWOULDBLOCK):
		l.Socket = r.Socket(dir)
		return &l, nil
	default:
		return nil, wire.Errorf(wire.CodeHostIO, "workspace: lock: %v", err)
	}
}

// ForVault returns the live workspace of the vault named name, if any.
func (r Registry) ForVault(name string) (*Live, error) {
	bs, err := r.Bindings()
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		if b.Vault != name {
			continue
		}
		if l, err := r.Live(b.Dir); err != nil || l != nil {
			return l, err
		}
	}
	return nil, nil
}

// Claim is the lock, and the record, of the process serving a workspace.
type Claim struct {
	r    Registry
	dir  string
	lock *os.File
}

// Claim takes the workspace at dir for this process: it fails with
// vault_busy naming the pid while another process serves it. The live
// record is written with Publish, once the mount and the socket are
// ready; Release removes it and drops the lock.
func (r Registry) Claim(dir string) (*Claim, error) {
	if err := ensureDir(r.liveDir()); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(r.liveDir(), ID(dir)+".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "workspace: lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := 0
			if l, _ := r.Live(dir); l != nil {
				pid = l.PID
			}
			return nil, wire.Errorf(wire.CodeVaultBusy, "workspace: %s is served already (pid %d)", dir, pid).With("dir", dir).With("holder_pid", pid)
		}
		return nil, wire.Errorf(wire.CodeHostIO, "workspace: lock: %v", err)
	}
	// What a killed server left: its socket (the listener is made anew).
	_ = os.Remove(r.Socket(dir))
	_ = os.Remove(filepath.Join(r.liveDir(), ID(dir)+".json"))
	return &Claim{r: r, dir: dir, lock: f}, nil
}

// Publish writes the live record.
func (c *Claim) Publish(l Live) error {
	return writeRecord(c.r.liveDir(), ID(c.dir)+".json", l)
}

// Release removes the live record and the socket, and drops the lock.
func (c *Claim) Release() {
	_ = os.Remove(filepath.Join(c.r.liveDir(), ID(c.dir)+".json"))
	_ = os.Remove(c.r.Socket(c.dir))
	_ = c.lock.Close()
}

// ensureDir makes dir (and its parents) with mode 0700 and refuses one
// that is a symlink, not a directory or another user's; one of ours that
// others may enter is given 0700 back.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != uint32(os.Geteuid()) {
		return wire.Errorf(wire.CodeHostIO, "workspace: %s is not a directory of avfs's user", dir).With("dir", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
		}
	}
	return nil
}

// writeRecord writes v as dir/name, atomically (a new file renamed into
// place), mode 0600.
func writeRecord(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if werr != nil {
		os.Remove(f.Name())
		return wire.Errorf(wire.CodeHostIO, "workspace: write %s: %v", name, werr)
	}
	return nil
}

// readRecord reads dir/name into v: ok is false when there is none. A
// record that is a symlink, not a regular file, another user's, in a
// directory others may write, oversized or not JSON is not used (ok
// false, no error): nobody else can tell avfs what a workspace is.
func readRecord(dir, name string, v any) (bool, error) {
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || !ours(fi) {
		return false, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return false, nil
	}
	if err != nil {
		return false, wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRecord || !ours(fi) {
		return false, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecord))
	if err != nil {
		return false, wire.Errorf(wire.CodeHostIO, "workspace: %v", err)
	}
	if json.Unmarshal(b, v) != nil {
		return false, nil
	}
	return true, nil
}

func ours(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Geteuid())
}

// VaultName is the vault name a new workspace at dir gets: its base name
// made a valid vault name, and the first 8 hex digits of its id, so that
// two projects called "app" get two vaults.
func VaultName(dir string) string {
	var b strings.Builder
	for _, c := range filepath.Base(dir) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == '-' || c == '_' || c == '.' || c == ' ':
			if b.Len() > 0 {
				b.WriteByte('-')
			}
		}
		if b.Len() >= 40 {
			break
		}
	}
	base := strings.Trim(b.String(), "-_")
	if base == "" {
		base = "ws"
	}
	return fmt.Sprintf("%s-%s", base, ID(dir)[:8])
}
