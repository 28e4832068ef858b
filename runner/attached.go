package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"avfs/mount"
	"avfs/vault"
	"avfs/wire"
)

// Attached is a vault this process keeps mounted at a project directory
// for a workspace (`avfs workspace up DIR`): the directory on the host
// *is* the vault, so that an agent harness's own file tools (which write
// there) and the commands avfs runs see one tree at one path.
//
// A run of the attached vault (Runner.Attached) is the same pipeline as
// any other — decision, checkpoint, sandbox, change summary, audit — with
// three differences:
//   - the vault is not mounted for the run: the command works in the live
//     mount, at Dir, and the mount stays when it ends;
//   - the sandbox shows the vault at Dir, not at sandbox.workspace, so
//     every absolute path the agent uses (/home/u/proj/src/a.go) means in
//     the sandbox what it means on the host, and the policy reads paths
//     under Dir as the vault's;
//   - a checkpoint restored under the live mount (--rollback-on-failure,
//     Runner.Restore) tells the mount what changed, so the kernel forgets
//     what it cached (mount.Session.Invalidate).
//
// A --readonly run gets a read-only mount of its own, shown at Dir in its
// sandbox, as before; --mountpoint and --mount-mode materialize cannot
// apply to a vault that is mounted already and are refused. The mount's
// writer lock is this process's, so the runs of a workspace are the only
// writers of its vault besides the mount itself; they take turns as every
// run of one vault does.
type Attached struct {
	Vault   string         // the vault's name
	Dir     string         // the project directory: where the vault is mounted, and where a sandbox shows it
	Session *mount.Session // the live mount at Dir
}

// attachedTo is r.Attached when it is the vault named name, else nil.
func (r *Runner) attachedTo(name string) *Attached {
	if a := r.Attached; a != nil && a.Vault == name {
		return a
	}
	return nil
}

// attached is the workspace the run works in, or nil: the attached vault,
// for a run that may write.
func (x *execution) attached() *Attached {
	if x.req.Readonly {
		return nil
	}
	return x.r.attachedTo(x.info.Name)
}

// checkAttached refuses what cannot apply to a vault that is mounted
// already.
func (x *execution) checkAttached() error {
	a := x.attached()
	if a == nil {
		return nil
	}
	if x.req.Mountpoint != "" {
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --mountpoint: the vault %s is the workspace at %s, mounted there already", a.Vault, a.Dir).With("dir", a.Dir)
	}
	if x.req.MountMode == ModeMaterialize {
		return wire.Errorf(wire.CodeInvalidInput, "proxy exec: --mount-mode materialize: the vault %s is the workspace at %s, mounted there already", a.Vault, a.Dir).With("dir", a.Dir)
	}
	if a.Session == nil || a.Session.State() != mount.StateMounted {
		return wire.Errorf(wire.CodeMountFailed, "proxy exec: the workspace at %s is no longer mounted", a.Dir).With("dir", a.Dir)
	}
	return nil
}

// presentAttached is the workspace of a run in the attached vault: the
// live mount, and a run directory of its own (the sandbox's view is built
// there). Its record names no mount, so that cleaning up after a killed
// avfs never touches the workspace's.
func (r *Runner) presentAttached(a *Attached) (*workspace, error) {
	run, err := r.newRun()
	if err != nil {
		return nil, err
	}
	ws := &workspace{mode: "fuse", dir: a.Dir, base: run.Dir, run: run, attached: true}
	if err := run.writeRecord(mountpointRecord{Dir: filepath.Join(run.Dir, "root")}); err != nil {
		run.Remove()
		return nil, err
	}
	return ws, nil
}

// restore returns v to checkpoint ref; under an attached mount, the mount
// is told what changed.
func (r *Runner) restore(ctx context.Context, v *vault.Vault, name, ref string) (vault.RestoreResult, error) {
	res, err := v.RestoreCheckpoint(ctx, ref)
	if err != nil {
		return res, err
	}
	r.invalidate(ctx, name, res.Changes)
	return res, nil
}

// invalidate tells this process's attached mount of vault name, if any,
// that changes landed under it (a restore, undone or held changes), so
// the kernel forgets what it cached of them.
func (r *Runner) invalidate(ctx context.Context, name string, changes []vault.Change) {
	paths := make([]string, 0, len(changes))
	for _, c := range changes {
		paths = append(paths, c.Path)
	}
	r.invalidatePaths(ctx, name, paths)
}

// invalidatePaths is invalidate for changed paths.
func (r *Runner) invalidatePaths(ctx context.Context, name string, paths []string) {
	if a := r.attachedTo(name); a != nil && a.Session != nil {
		a.Session.Invalidate(ctx, paths)
	}
}

// Settle does what the decided approval id of vault name asks of held or
// previewed changes (vault.Store.SettleApproval: a grant applies them, a
// denied preview's fork goes), taking its turn with the vault's runs as
// Restore does, the grant's proof checked as a run would; under this
// process's attached mount the mount is told what changed. This is how
// the approval of a live workspace's vault is settled, by the process
// that serves it. Errors: as Restore's and SettleApproval's.
func (r *Runner) Settle(ctx context.Context, name, id string, wait time.Duration) ([]wire.Change, error) {
	applied := []wire.Change{}
	err := r.inTurn(ctx, name, "settle approval", wait, func(v *vault.Vault, vaultName string) error {
		a, err := v.Approval(ctx, id)
		if err != nil {
			return err
		}
		changes, err := r.Store.SettleApproval(ctx, v, a, r.checkGrant)
		paths := make([]string, 0, len(changes))
		for _, c := range changes {
			paths = append(paths, c.Path)
		}
		r.invalidatePaths(ctx, vaultName, paths)
		if changes != nil {
			applied = changes
		}
		return err
	})
	return applied, err
}

// Restore returns the vault name to checkpoint ref, as `avfs checkpoint
// restore` does, taking its turn with the vault's runs: it waits up to
// wait for the vault (a run in progress), holding it as a run does, so a
// restore never lands in the middle of one. Under this process's attached
// mount, the mount is told what changed (see Attached): this is how the
// vault of a live workspace is restored, by the process that serves it.
//
// Errors: the vault does not exist (not_found), the checkpoint does not
// exist, vault_busy after wait, or the vault's own errors. It never
// creates a vault.
func (r *Runner) Restore(ctx context.Context, name, ref string, wait time.Duration) (vault.RestoreResult, error) {
	var res vault.RestoreResult
	err := r.inTurn(ctx, name, "restore", wait, func(v *vault.Vault, vaultName string) error {
		var err error
		res, err = r.restore(ctx, v, vaultName, ref)
		return err
	})
	if res.Changes == nil {
		res.Changes = []vault.Change{}
	}
	return res, err
}

// inTurn opens vault name and runs f on it once it is this caller's turn
// with the vault's runs (waiting up to wait, vault_busy after), holding
// the vault as a run does until f returns; op names the operation in
// errors.
func (r *Runner) inTurn(ctx context.Context, name, op string, wait time.Duration, f func(v *vault.Vault, name string) error) error {
	v, err := r.Store.Open(ctx, name)
	if err != nil {
		return err
	}
	defer v.Close()
	info, err := v.Info(ctx)
	if err != nil {
		return err
	}
	until := time.Now().Add(wait)
	release, err := takeLocal(ctx, v.Path(), op, until)
	if err != nil {
		return fmt.Errorf("%s: waited %s for the vault: %w", op, wait, err)
	}
	defer release()
	if err := waitBusy(ctx, until, func() error { return v.Lock(ctx, LockExec, op) }); err != nil {
		return fmt.Errorf("%s: waited %s for the vault: %w", op, wait, err)
	}
	defer v.Unlock(context.WithoutCancel(ctx), LockExec)
	return f(v, info.Name)
}
