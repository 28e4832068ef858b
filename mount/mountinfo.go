package mount

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"avfs/wire"
)

// FsNamePrefix starts the mount table source (FUSE fsname) of every avfs
// mount: "avfs:" and the vault's name. IsAvfsMount knows avfs mounts by it.
const FsNamePrefix = "avfs:"

// Entry is what avfs reads of one line of /proc/self/mountinfo.
type Entry struct {
	Dir          string // mount point, unescaped
	FSType       string // "fuse.avfs", "tmpfs", ...
	Source       string // the mount source (a FUSE server's fsname), unescaped
	Major, Minor uint32 // the device of its files
}

// Avfs reports whether e is an avfs FUSE mount: a fuse file system
// (fstype "fuse" or "fuse.SUBTYPE"; not "fuseblk") whose source starts
// with FsNamePrefix.
func (e Entry) Avfs() bool {
	return (e.FSType == "fuse" || strings.HasPrefix(e.FSType, "fuse.")) && strings.HasPrefix(e.Source, FsNamePrefix)
}

// parseMountinfo reads mountinfo (proc(5)): per line, mount ID, parent
// ID, major:minor, root, mount point, mount options, optional fields up
// to a lone "-", then fstype, source and super options; fields are
// separated by spaces, which paths and sources escape (with tab, newline
// and backslash) as \ooo octal. Malformed lines are skipped.
func parseMountinfo(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if e, ok := parseMountinfoLine(sc.Text()); ok {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

func parseMountinfoLine(line string) (Entry, bool) {
	f := strings.Split(line, " ")
	if len(f) < 9 { // 6 fixed fields, "-", fstype, source
		return Entry{}, false
	}
	maj, min, ok := strings.Cut(f[2], ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return Entry{}, false
	}
	for i := 6; i+2 < len(f); i++ {
		if f[i] == "-" {
			return Entry{Dir: unescapeMount(f[4]), FSType: unescapeMount(f[i+1]), Source: unescapeMount(f[i+2]),
				Major: uint32(ma), Minor: uint32(mi)}, true
		}
	}
	return Entry{}, false
}

// unescapeMount decodes the octal escapes of mountinfo fields (\040 for
// space); a backslash not followed by three octal digits is kept.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountDir is dir as the mount table names it: absolute, clean, its
// symlinks resolved. A dead FUSE mount cannot be resolved itself (its
// root answers ENOTCONN), so then only its parent is.
func mountDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", wire.Errorf(wire.CodeInvalidInput, "%s: %v", dir, err).With("dir", dir)
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p, nil
	}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(parent, filepath.Base(abs)), nil
	}
	return abs, nil
}

// Mounts reads this process's mount table, in mount order.
func Mounts() ([]Entry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "read the mount table: %v", err)
	}
	defer f.Close()
	entries, err := parseMountinfo(f)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "read the mount table: %v", err)
	}
	return entries, nil
}

// MountAt returns the mount visible at dir (absolute and clean, taken as
// the mount table names it): the last one mounted there, as mounts stack.
// found is false for a directory that is not a mount point.
func MountAt(dir string) (e Entry, found bool, err error) {
	entries, err := Mounts()
	if err != nil {
		return e, false, err
	}
	for _, m := range entries {
		if m.Dir == dir {
			e, found = m, true
		}
	}
	return e, found, nil
}

// IsAvfsMount reports whether the mount visible at dir is an avfs FUSE
// mount. dir is made absolute and its symlinks resolved (only its parent's
// for a dead mount, whose server was killed: that is still an avfs mount).
// A plain directory, or another file system mounted there, is false.
//
// It trusts /proc/self/mountinfo as read at the call: a mount whose
// fstype is fuse (or fuse.SUBTYPE) and whose source starts with "avfs:"
// (FsNamePrefix) is taken for avfs. The source is whatever the FUSE
// server chose, so any FUSE file system may claim it; only FUSE ones can,
// and an unprivileged user may only unmount their own. It never touches
// the mount itself, so a dead one does not hang it. Errors (host_io) are
// only for an unreadable mount table.
func IsAvfsMount(dir string) (bool, error) {
	p, err := mountDir(dir)
	if err != nil {
		return false, err
	}
	e, found, err := MountAt(p)
	return found && e.Avfs(), err
}
