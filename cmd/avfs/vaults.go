package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// store returns the vault store of the state directory; every change the
// CLI makes is audited as "cli:<login>", each audit row with its MAC under
// the installation's audit key (made on first use; audit_key_invalid when
// the key file cannot be trusted).
func (e *env) store() (*vault.Store, error) {
	key, err := e.auditKey(true)
	if err != nil {
		return nil, err
	}
	return vault.NewStore(e.home, vault.Options{Actor: "cli:" + cliUser(), AuditKey: key}), nil
}

// readStore is the store for what only reads vaults and the current
// vault's name: it needs no audit key.
func (e *env) readStore() *vault.Store {
	return vault.NewStore(e.home, vault.Options{Actor: "cli:" + cliUser()})
}

func cliUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return fmt.Sprintf("uid%d", os.Getuid())
}

// vaultName is the selected vault: --vault (or AVFS_VAULT), else the
// current vault, else "default".
func (e *env) vaultName() string {
	if e.vault != "" {
		return e.vault
	}
	return e.readStore().Current()
}

// openNamed opens the vault called name; the default vault is created on
// first use, any other missing vault is vault_not_found.
func (e *env) openNamed(c *cli.Context, name string) (*vault.Vault, error) {
	s, err := e.store()
	if err != nil {
		return nil, err
	}
	return s.OpenOrCreate(c.Context, name)
}

// namedOrSelected is the vault named by the command's optional NAME
// argument, else the selected vault.
func (e *env) namedOrSelected(c *cli.Context) (string, error) {
	a, err := args(c, 0, 1, "[NAME]")
	if err != nil {
		return "", err
	}
	if len(a) == 1 {
		return a[0], nil
	}
	return e.vaultName(), nil
}

// withVault runs fn on the selected vault and closes it afterwards.
func (e *env) withVault(c *cli.Context, fn func(v *vault.Vault) error) error {
	return e.withNamed(c, e.vaultName(), fn)
}

// withNamed runs fn on the vault called name and closes it afterwards.
func (e *env) withNamed(c *cli.Context, name string, fn func(v *vault.Vault) error) error {
	v, err := e.openNamed(c, name)
	if err != nil {
		return err
	}
	defer v.Close()
	return fn(v)
}

// args checks the number of positional arguments: at least min and at most
// max (max < 0: no limit). names name them in the usage message.
func args(c *cli.Context, min, max int, names string) ([]string, error) {
	a := c.Args().Slice()
	cmd := strings.TrimPrefix(c.Command.HelpName, "avfs ")
	if len(a) < min {
		return nil, usageError("%s: missing argument (usage: avfs %s %s)", cmd, cmd, names)
	}
	if max >= 0 && len(a) > max {
		return nil, usageError("%s: too many arguments %q (usage: avfs %s %s)", cmd, a[max:], cmd, names)
	}
	return a, nil
}

// vaultPaths decodes the vault path arguments ps in place when --path-b64
// was given: each is then the standard base64 of the path's bytes (the
// path_b64 of --json output; docs/envelope.md, "Names that are not
// UTF-8"), which lets a caller that can only pass UTF-8 text name any
// file. Without the flag it does nothing: argv is bytes, and a path given
// raw reaches the vault byte for byte. One that is not standard base64 is
// invalid_input, and ps is then left partly decoded.
func (e *env) vaultPaths(ps []string) error {
	if !e.pathB64 {
		return nil
	}
	for i, p := range ps {
		d, err := wire.DecodeB64("--path-b64: argument", p)
		if err != nil {
			return err
		}
		ps[i] = d
	}
	return nil
}

// parseMode parses an octal permission mode such as 0644 or 755.
func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	if err != nil || m > 0o7777 {
		return 0, usageError("invalid mode %q: want octal permission bits such as 0644", s)
	}
	return uint32(m), nil
}

// modeString formats a kind and permission bits like ls -l: -rwxr-xr-x.
func modeString(kind vault.Kind, mode uint32) string {
	var b [10]byte
	switch kind {
	case vault.KindDir:
		b[0] = 'd'
	case vault.KindSymlink:
		b[0] = 'l'
	case vault.KindFifo:
		b[0] = 'p'
	case vault.KindSocket:
		b[0] = 's'
	case vault.KindCharDev:
		b[0] = 'c'
	case vault.KindBlockDev:
		b[0] = 'b'
	default:
		b[0] = '-'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if mode&(1<<uint(8-i)) != 0 {
			b[i+1] = rwx[i]
		} else {
			b[i+1] = '-'
		}
	}
	special := func(bit uint32, pos int, set, unset byte) {
		if mode&bit != 0 {
			if b[pos] == 'x' {
				b[pos] = set
			} else {
				b[pos] = unset
			}
		}
	}
	special(0o4000, 3, 's', 'S')
	special(0o2000, 6, 's', 'S')
	special(0o1000, 9, 't', 'T')
	return string(b[:])
}

// timeFmt is how times are shown to people.
// They carry the zone: a time without one is ambiguous across machines.
const timeFmt = "2006-01-02 15:04:05 -0700"
