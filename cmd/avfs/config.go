package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"avfs/engine"
	"avfs/wire"
)

// config is $AVFS_HOME/config.json, or the file AVFS_CONFIG names. Every
// section is optional; unknown sections are ignored so that older binaries
// read newer files.
type config struct {
	Policy   policyConfig   `json:"policy"`
	Proxy    proxyConfig    `json:"proxy"`
	Approval approvalConfig `json:"approval"`
	Sandbox  sandboxConfig  `json:"sandbox"`
	// Replication is how vault replicas are reached (replicate.go).
	Replication replicationConfig `json:"replication"`
}

// sandboxConfig is the "sandbox" section: how proxy exec holds commands
// (docs/sandbox.md).
type sandboxConfig struct {
	// Mode is auto (the default), namespaces or none; --sandbox overrides it.
	Mode string `json:"mode"`
	// Workspace is where the command sees the vault (/workspace).
	Workspace string `json:"workspace"`
	// HomeFiles are the invoking user's dotfiles, relative to their home,
	// the sandbox shows read-only in its home (default [".gitconfig"]).
	HomeFiles []string `json:"home_files"`
	// GitIdentity is the name and email git falls back to in the sandbox
	// when the user's own git config has none.
	GitIdentity struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"git_identity"`
	// TmpSize caps /tmp, the home and /dev/shm, e.g. "1GiB".
	TmpSize string `json:"tmp_size"`
	// CacheSize caps a vault's tool cache, e.g. "2GiB".
	CacheSize string `json:"cache_size"`
}

// proxyConfig is the "proxy" section.
type proxyConfig struct {
	// Env adds variables to every command's environment: "KEY" passes
	// avfs's own value, "KEY=VALUE" sets one. AVFS_APPROVER_KEY never passes.
	Env []string `json:"env"`
}

// approvalConfig is the "approval" section.
type approvalConfig struct {
	// KeyFile holds the approver secret. When it is set (or
	// AVFS_APPROVER_KEY is), grants need the secret and runs check them.
	// Relative paths as for policy bundles.
	KeyFile string `json:"key_file"`
	// PublicKeyFile holds the approvers' Ed25519 public key (PEM). When it
	// is set, grants must be signed with the matching private key and runs
	// check the signature; the secret is not used. Relative paths as for
	// policy bundles.
	PublicKeyFile string `json:"public_key_file"`
}

// policyConfig is the "policy" section.
type policyConfig struct {
	// Bundles are loaded after $AVFS_HOME/policy and before --bundle flags.
	// Relative paths are relative to the directory of the config file.
	Bundles []string `json:"bundles"`
	// VerificationKey is the default of --verification-key (a PEM public
	// key file or an HMAC secret); relative file paths as for Bundles.
	VerificationKey string `json:"verification_key"`
	// NoDefaultBundle is the default of --no-default-bundle.
	NoDefaultBundle bool `json:"no_default_bundle"`
	// AllowNondeterministic lets bundles call the builtins that reach the
	// network, read the clock or are random (engine.RefusedBuiltins). It
	// weakens the policy: see engine.PolicyOptions.
	AllowNondeterministic bool `json:"allow_nondeterministic"`
	// EvalTimeout is the deadline of one decision, a Go duration ("1s",
	// "250ms"); "" is engine.DefaultEvalTimeout. loadConfig parses it into
	// evalTimeout.
	EvalTimeout string `json:"eval_timeout"`
	evalTimeout time.Duration
	// SkipEffects turns the effects stage off: a run's changes stay
	// whatever data.avfs.effects.decision would say (docs/envelope.md,
	// "Policy over effects"). Only the config can say so, never a flag
	// the agent's call could carry.
	SkipEffects bool `json:"skip_effects"`
	// OPAConfig is OPA's configuration file (services, bundles, status,
	// decision_logs, discovery, keys, labels, persistence_directory):
	// the default of --config-file. Relative paths as for Bundles. Its
	// bundles are compiled with the others (docs/policy.md, "Bundles
	// from a bundle service").
	OPAConfig string `json:"opa_config"`
	// OPAWait is how long a command other than avfs serve waits for the
	// bundles of OPAConfig to activate before it denies, a Go duration;
	// "" is defaultOPAWait. loadConfig parses it into opaWait.
	OPAWait string `json:"opa_wait"`
	opaWait time.Duration
}

// engineOptions are the options the policy is compiled with.
func (p policyConfig) engineOptions() engine.PolicyOptions {
	return engine.PolicyOptions{AllowNondeterministic: p.AllowNondeterministic, EvalTimeout: p.evalTimeout}
}

// configPath is AVFS_CONFIG, else $AVFS_HOME/config.json.
func configPath(home string) string {
	if p := os.Getenv("AVFS_CONFIG"); p != "" {
		return p
	}
	return filepath.Join(home, "config.json")
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig(home string) (config, error) {
	var cfg config
	path := configPath(home)
	bs, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, wire.Errorf(wire.CodeInvalidInput, "read config %s: %w", path, err).With("path", path)
	}
	if err := json.Unmarshal(bs, &cfg); err != nil {
		return cfg, wire.Errorf(wire.CodeInvalidInput, "read config %s: %w", path, err).With("path", path)
	}
	if t := cfg.Policy.EvalTimeout; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return cfg, wire.Errorf(wire.CodeInvalidInput, "read config %s: policy.eval_timeout %q is not a positive duration such as \"1s\" or \"250ms\"", path, t).
				With("path", path).With("key", "policy.eval_timeout")
		}
		cfg.Policy.evalTimeout = d
	}
	cfg.Policy.opaWait = defaultOPAWait
	if t := cfg.Policy.OPAWait; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d < 0 {
			return cfg, wire.Errorf(wire.CodeInvalidInput, "read config %s: policy.opa_wait %q is not a duration such as \"10s\" (0: do not wait)", path, t).
				With("path", path).With("key", "policy.opa_wait")
		}
		cfg.Policy.opaWait = d
	}
	dir := filepath.Dir(path)
	if cfg.Policy.OPAConfig != "" {
		cfg.Policy.OPAConfig = relativeTo(dir, cfg.Policy.OPAConfig)
	}
	for i, b := range cfg.Policy.Bundles {
		cfg.Policy.Bundles[i] = relativeTo(dir, b)
	}
	if k := cfg.Policy.VerificationKey; k != "" {
		// A key that names an existing file, relative to the config file,
		// is that file; anything else stays as written (an HMAC secret).
		if p := relativeTo(dir, k); fileExists(p) {
			cfg.Policy.VerificationKey = p
		}
	}
	if cfg.Approval.KeyFile != "" {
		cfg.Approval.KeyFile = relativeTo(dir, cfg.Approval.KeyFile)
	}
	if cfg.Approval.PublicKeyFile != "" {
		cfg.Approval.PublicKeyFile = relativeTo(dir, cfg.Approval.PublicKeyFile)
	}
	if f := cfg.Replication.S3.CredentialsFile; f != "" {
		cfg.Replication.S3.CredentialsFile = relativeTo(dir, f)
	}
	return cfg, nil
}

func relativeTo(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
