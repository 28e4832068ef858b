package vault

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// Forks that never completed
//
// A fork is built in <vaults>/.NAME.UUID.tmp and linked to NAME.avfs once
// complete; its parent records it (the pin, a row of its forks table)
// before the build starts, so that the generation the fork copies is kept.
// A fork killed in between (kill -9, a crash, a power cut) leaves the pin,
// which keeps every row and chunk of that generation from gc, names a
// fork that does not exist (vault info, vault delete), and leaves the
// temporary file and its -wal/-shm side files behind.
//
// Whether a fork is alive is proved by a lock, not guessed from time or a
// pid: the forking process creates its temporary file and takes an
// exclusive flock on it before it commits the pin, and holds it until the
// fork is linked into place (or its pin released) and the file removed.
// The kernel drops the lock when the process dies, however it dies. So a
// pin whose temporary file is locked belongs to a fork under way; one
// whose file can be locked by someone else, or is gone, belongs to a
// forking process that has ended: the fork completed if NAME.avfs is the
// vault with the pin's uuid, and never will otherwise (a uuid is made for
// one fork only).
//
// Vault files live on a local file system (SQLite's WAL needs shared
// memory, which network file systems do not give), where flock locks and
// SQLite's fcntl locks do not interact. A fork made by an avfs older than
// this recovery holds no lock: recovering the parent while such a fork is
// under way would release its pin.

// forkTmpSuffixes are the side files SQLite may make beside a fork's
// temporary file.
var forkTmpSuffixes = []string{"-wal", "-shm", "-journal"}

// forkTmpName is the name of the temporary file of the fork uuid called name.
func forkTmpName(name, uuid string) string { return "." + name + "." + uuid + ".tmp" }

// parseForkTmp splits a file name .NAME.UUID.tmp[-wal|-shm|-journal] into
// the temporary file's name and its side-file suffix; ok is false for any
// other name.
func parseForkTmp(file string) (base, suffix string, ok bool) {
	base = file
	for _, s := range forkTmpSuffixes {
		if b, found := strings.CutSuffix(file, s); found {
			base, suffix = b, s
			break
		}
	}
	rest, found := strings.CutPrefix(base, ".")
	if !found {
		return "", "", false
	}
	if rest, found = strings.CutSuffix(rest, ".tmp"); !found || len(rest) < 38 {
		return "", "", false
	}
	name, uuid := rest[:len(rest)-37], rest[len(rest)-36:]
	if rest[len(rest)-37] != '.' || ValidName(name) != nil || !validUUID(uuid) {
		return "", "", false
	}
	return base, suffix, true
}

// validUUID reports whether s is a uuid as newUUID writes it (lower-case hex).
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

var (
	// errForkTmpBusy says that a live process holds a fork's temporary file.
	errForkTmpBusy = errors.New("the fork's temporary file is locked by a live process")
	// errNotForkTmp says that a file named like a fork's temporary file is
	// not a regular file of this user: it is left alone.
	errNotForkTmp = errors.New("not a fork's temporary file of this user")
)

// createForkTmp creates the temporary file of a new fork called name in
// dir, with a fresh uuid, and returns it flocked exclusively: the lock
// proves the fork alive to recoverForks until it is closed, so the caller
// keeps it open until the fork is linked into place or its pin released,
// and the file removed. A recovery may take the lock of a file created but
// not locked yet and remove it; a new uuid is then tried.
func createForkTmp(dir, name string) (uuid, tmp string, lock *os.File, err error) {
	for range 3 {
		uuid = newUUID()
		tmp = filepath.Join(dir, forkTmpName(name, uuid))
		// Vault files are private, like the ones Create makes.
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return "", "", nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // a recovery holds it and removes it
			}
			return "", "", nil, err
		}
		if sameFile(f, tmp) {
			return uuid, tmp, f, nil
		}
		f.Close() // a recovery removed it before it was locked
	}
	return "", "", nil, fmt.Errorf("create a temporary file for fork %q: removed by a concurrent recovery three times", name)
}

// sameFile reports whether path (not followed if a symlink) is the file f.
func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// lockForkTmp takes the lock of the fork temporary file tmp without
// waiting. It fails with fs.ErrNotExist when there is no such file,
// errForkTmpBusy when a live process holds it, and errNotForkTmp when tmp
// is not a regular file of this user (it is not followed if a symlink).
func lockForkTmp(tmp string) (*os.File, error) {
	f, err := os.OpenFile(tmp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s: %w", tmp, errNotForkTmp)
		}
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", tmp, errNotForkTmp)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errForkTmpBusy
		}
		return nil, err
	}
	if !sameFile(f, tmp) {
		// Removed (by another recovery) between the open and the lock.
		f.Close()
		return nil, fs.ErrNotExist
	}
	return f, nil
}

// removeForkTmp removes the temporary file tmp, which the caller has
// locked, and its side files: only regular files of this user, never
// following a symlink. It closes lock.
func removeForkTmp(tmp string, lock *os.File) error {
	var errs []error
	// Side files first: should this stop half-way, the temporary file is
	// still there to be found and locked again.
	for _, s := range forkTmpSuffixes {
		errs = append(errs, removeOwnFile(tmp+s))
	}
	errs = append(errs, removeOwnFile(tmp))
	errs = append(errs, lock.Close())
	return errors.Join(errs...)
}

// removeOwnFile removes p if it is a regular file of this user (a missing
// one is fine). unlink(2) removes a symlink, not its target, should p be
// replaced by one after the check.
func removeOwnFile(p string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ForkRecovery says what recoverForks cleaned up.
type ForkRecovery struct {
	// Released lists the uuids of the pins released: forks that never
	// completed.
	Released []string `json:"released"`
	// FilesRemoved counts the temporary files (with their side files) of
	// dead forks removed from the vaults directory.
	FilesRemoved int `json:"files_removed"`
}

// deadForks is what releaseDeadForks found in a transaction: the pins it
// deleted, and the locks it holds on the temporary files of ended forks
// (dead ones and completed ones killed before they removed theirs).
type deadForks struct {
	released []string
	locks    map[string]*os.File // temporary file -> its lock
}

// releaseDeadForks deletes, in the transaction t, the pins of the forks
// that never completed and never will, as deadForkPins judges them. Each
// release is audited (vault.fork_released).
//
// It returns the locks it took; the caller hands them to finish once the
// transaction has ended, committed or not.
func (t *txn) releaseDeadForks(dir string) (*deadForks, error) {
	d, dead, err := deadForkPins(t.ctx, t.tx, dir)
	if err != nil {
		return d, err
	}
	for _, p := range dead {
		if _, err := t.tx.ExecContext(t.ctx, "DELETE FROM forks WHERE uuid = ?", p.uuid); err != nil {
			return d, err
		}
		t.audit("vault.fork_released", "/", map[string]any{"fork_uuid": p.uuid, "fork": p.name, "reason": "the fork never completed"})
		d.released = append(d.released, p.uuid)
	}
	return d, nil
}

// forkPin is a row of the forks table.
type forkPin struct{ uuid, name string }

// deadForkPins returns, read in q, the pins of the forks that never
// completed and never will (see "Forks that never completed"): a pin
// whose temporary file in dir is gone or can be locked, and whose
// NAME.avfs is missing or another vault than the pin's uuid. It keeps the
// pin out when a live process holds the temporary file, when NAME.avfs is
// the fork, and whenever it cannot tell (a name or uuid that is not one
// avfs writes, a temporary file that is not a regular file of this user, a
// NAME.avfs it cannot read): it never judges dead a pin it has not proved
// dead. It changes nothing: releaseDeadForks releases what it returns, gc's
// dry run counts it.
//
// It returns the locks it took on temporary files (d.released is empty);
// the caller hands them to finish. Cost: one query of the forks table and,
// per pin, an open(2) of its temporary file (normally missing), a stat(2)
// of its vault file and, when that exists, a read-only open of it to read
// its uuid.
func deadForkPins(ctx context.Context, q querier, dir string) (*deadForks, []forkPin, error) {
	d := &deadForks{locks: map[string]*os.File{}}
	var pins []forkPin
	rows, err := q.QueryContext(ctx, "SELECT uuid, name FROM forks")
	if err != nil {
		return d, nil, err
	}
	for rows.Next() {
		var p forkPin
		if err := rows.Scan(&p.uuid, &p.name); err != nil {
			rows.Close()
			return d, nil, err
		}
		pins = append(pins, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d, nil, err
	}
	var dead []forkPin
	for _, p := range pins {
		if ValidName(p.name) != nil || !validUUID(p.uuid) {
			continue
		}
		tmp := filepath.Join(dir, forkTmpName(p.name, p.uuid))
		lock, err := lockForkTmp(tmp)
		switch {
		case err == nil:
			d.locks[tmp] = lock
		case errors.Is(err, fs.ErrNotExist):
		default:
			continue // under way, or not ours to judge
		}
		// The forking process has ended: did it link its fork into place?
		switch u, err := vaultUUID(ctx, filepath.Join(dir, p.name+fileExt)); {
		case err != nil:
			continue
		case u == p.uuid:
			continue
		}
		dead = append(dead, p)
	}
	return d, dead, nil
}

// vaultUUID returns the uuid of the vault file at path, "" when there is
// no file there.
func vaultUUID(ctx context.Context, path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	v, err := open(path, Options{Actor: "recover"}, false)
	if err != nil {
		return "", err
	}
	defer v.Close()
	var u string
	err = v.rdb.QueryRowContext(ctx, "SELECT uuid FROM state WHERE id = 1").Scan(&u)
	return u, err
}

// finish ends d once the transaction that ran releaseDeadForks has
// ended: when it committed, it removes the temporary files d holds locked
// (dead forks' and completed forks' leftovers) and returns how many; else
// it only drops the locks (the files stay for the next recovery).
func (d *deadForks) finish(committed bool) (int, error) {
	var errs []error
	n := 0
	for tmp, lock := range d.locks {
		if !committed {
			errs = append(errs, lock.Close())
			continue
		}
		if err := removeForkTmp(tmp, lock); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	d.locks = nil
	return n, errors.Join(errs...)
}

// sweepForkTmps removes from dir the temporary files of forks whose
// process has ended (their lock can be taken), with their side files, and
// side files left without their temporary file. It removes only names of
// the exact form .NAME.UUID.tmp[-wal|-shm|-journal], regular files of this
// user, never following a symlink, and never the file of a fork under
// way. Removing the file of a fork that is still pinned is safe: a pin
// with no temporary file is judged by its vault file alone. With remove
// false it removes nothing and counts the temporary files it would remove
// (gc's dry run). Cost: one readdir of dir, and a lock attempt per
// temporary file found.
func sweepForkTmps(dir string, remove bool) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	bases := map[string]bool{}   // temporary files present
	orphans := map[string]bool{} // side files, by their temporary file's name
	for _, e := range ents {
		base, suffix, ok := parseForkTmp(e.Name())
		if !ok {
			continue
		}
		if suffix == "" {
			bases[base] = true
		} else {
			orphans[base] = true
		}
	}
	var errs []error
	n := 0
	for base := range bases {
		tmp := filepath.Join(dir, base)
		lock, err := lockForkTmp(tmp)
		if err != nil {
			if !errors.Is(err, errForkTmpBusy) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotForkTmp) {
				errs = append(errs, err)
			}
			continue
		}
		if !remove {
			errs = append(errs, lock.Close())
			n++
			continue
		}
		if err := removeForkTmp(tmp, lock); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if !remove {
		return n, errors.Join(errs...)
	}
	// Side files whose temporary file is gone: a fork's side files exist
	// only while its temporary file does, except while whoever removes
	// them (the fork, a recovery) is at it.
	for base := range orphans {
		if bases[base] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, base)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		for _, s := range forkTmpSuffixes {
			errs = append(errs, removeOwnFile(filepath.Join(dir, base+s)))
		}
	}
	return n, errors.Join(errs...)
}

// recoverForks cleans up after forks of v that never completed: it
// releases their pins in one transaction (releaseDeadForks), then removes
// their temporary files and those of any other fork in the vaults
// directory whose process has ended (sweepForkTmps). It runs where the
// pins matter, before gc and before a vault is deleted, and not on every
// open: its cost is one write transaction that normally writes nothing,
// one query of the forks table, per pin an open(2) attempt and a stat(2)
// and, for a pin whose vault file exists, a read-only open of that file,
// and one readdir of the vaults directory; small beside gc's vacuum or a
// delete's detaching of forks.
//
// Pins of forks under way in any process, and of completed forks, are
// never released; files are removed only as sweepForkTmps says. Two
// recoveries may run at once (in two processes): the transaction
// serialises the releases, the locks the removals. An error from the
// transaction means no pin was released; an error removing files comes
// after the pins were released, and the files are found again next time.
func (v *Vault) recoverForks(ctx context.Context) (ForkRecovery, error) {
	dir := filepath.Dir(v.path)
	var d *deadForks
	err := v.update(ctx, "recover forks", func(t *txn) error {
		var err error
		d, err = t.releaseDeadForks(dir)
		return err
	})
	var rec ForkRecovery
	if err == nil {
		rec.Released = d.released
	}
	var ferr error
	if d != nil {
		rec.FilesRemoved, ferr = d.finish(err == nil)
	}
	if err != nil {
		return rec, errors.Join(err, ferr)
	}
	n, serr := sweepForkTmps(dir, true)
	rec.FilesRemoved += n
	if err := errors.Join(ferr, serr); err != nil {
		return rec, wire.Errorf(wire.CodeHostIO, "recover forks: remove temporary files: %w", err)
	}
	return rec, nil
}
