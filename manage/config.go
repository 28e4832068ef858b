package manage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/open-policy-agent/opa/v1/util"

	"avfs/bundles"
	"avfs/wire"
)

// Config is OPA's configuration file as avfs runs it: the file's own
// format (services, bundles, decision_logs, status, discovery, keys,
// labels, persistence_directory …; see OPA's configuration reference),
// with the persistence directory made absolute.
type Config struct {
	// Path is the file it was read from.
	Path string
	// Raw is the configuration as plugins.New reads it (JSON), with
	// persistence_directory set to PersistenceDirectory.
	Raw []byte
	// PersistenceDirectory is where OPA's plugins keep persisted bundles
	// (persist: true): the file's persistence_directory, relative to the
	// file's directory when relative, else the default LoadConfig was
	// given. What is there decides the policy: it must be as trusted as
	// the file.
	PersistenceDirectory string
	// Bundles are the names of the bundles the file configures (its
	// "bundles" section; discovery may configure others).
	Bundles []string
	// Discovery says the file configures a discovery bundle.
	Discovery bool
}

// LoadConfig reads OPA's configuration file at path (JSON or YAML).
// persistDefault is the persistence directory when the file names none:
// never the working directory, which OPA would use. A file that cannot be
// read or parsed, or that names a bundle "default" (the name of avfs's
// embedded bundle), is invalid_input with the detail "path". LoadConfig
// only reads: the services and plugins are checked by New.
func LoadConfig(path, persistDefault string) (*Config, error) {
	bs, err := os.ReadFile(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInvalidInput, "read OPA configuration %s: %w", path, err).With("path", path)
	}
	var doc map[string]any
	if err := util.Unmarshal(bs, &doc); err != nil {
		return nil, wire.Errorf(wire.CodeInvalidInput, "read OPA configuration %s: %w", path, err).With("path", path)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	cfg := &Config{Path: path, PersistenceDirectory: persistDefault}
	switch dir := doc["persistence_directory"].(type) {
	case nil:
	case string:
		if dir != "" {
			cfg.PersistenceDirectory = dir
			if !filepath.IsAbs(dir) {
				cfg.PersistenceDirectory = filepath.Join(filepath.Dir(path), dir)
			}
		}
	default:
		return nil, wire.Errorf(wire.CodeInvalidInput, "read OPA configuration %s: persistence_directory is not a string", path).
			With("path", path).With("key", "persistence_directory")
	}
	if cfg.PersistenceDirectory == "" {
		return nil, wire.Errorf(wire.CodeInternal, "read OPA configuration %s: no persistence directory", path).With("path", path)
	}
	if abs, err := filepath.Abs(cfg.PersistenceDirectory); err == nil {
		cfg.PersistenceDirectory = abs
	}
	doc["persistence_directory"] = cfg.PersistenceDirectory
	if bs, ok := doc["bundles"].(map[string]any); ok {
		for name := range bs {
			if name == bundles.DefaultName {
				return nil, wire.Errorf(wire.CodeInvalidInput, "read OPA configuration %s: a bundle may not be called %q, the name of avfs's embedded bundle", path, name).
					With("path", path).With("key", "bundles."+name)
			}
			cfg.Bundles = append(cfg.Bundles, name)
		}
		slices.Sort(cfg.Bundles)
	}
	cfg.Discovery = doc["discovery"] != nil
	if cfg.Raw, err = json.Marshal(doc); err != nil {
		return nil, wire.Errorf(wire.CodeInvalidInput, "read OPA configuration %s: %w", path, err).With("path", path)
	}
	return cfg, nil
}
