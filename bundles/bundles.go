package bundles

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"avfs/policies"
	"avfs/wire"
)

// DefaultName is the name of the embedded default bundle.
const DefaultName = "default"

// Options say which bundles Load reads.
type Options struct {
	// IncludeDefault loads the default bundle embedded in the binary first.
	IncludeDefault bool
	// HomePolicyDir is loaded after the default when it exists
	// ($AVFS_HOME/policy); "" skips it.
	HomePolicyDir string
	// Paths are bundle directories or `opa build` tarballs (.tar.gz), loaded
	// in order after the home directory. A path given twice loads once.
	Paths []string
	// VerificationKey, when set, is a PEM public key (RSA, ECDSA or
	// Ed25519) or an HMAC secret, given as the path of a file holding it or
	// as the secret itself. Every bundle but the embedded default must then
	// carry a valid signature. When empty, signatures are not checked.
	VerificationKey string
}

// Bundle is one loaded bundle.
type Bundle struct {
	Name     string         // DefaultName, or the absolute path it was loaded from
	Bundle   *bundle.Bundle // the parsed bundle, modules with their annotations
	Signed   bool           // it has a .signatures.json
	Verified bool           // its signature was verified with the verification key
}

// Info is the bundle's name, revision and roots.
func (b *Bundle) Info() wire.BundleInfo {
	var roots []string
	if b.Bundle.Manifest.Roots != nil {
		roots = slices.Clone(*b.Bundle.Manifest.Roots)
	}
	if roots == nil {
		roots = []string{}
	}
	return wire.BundleInfo{Name: b.Name, Revision: b.Bundle.Manifest.Revision, Roots: roots}
}

// Set is the bundles to evaluate together, in load order.
type Set struct {
	Bundles []*Bundle
}

// Infos describes every bundle of the set.
func (s *Set) Infos() []wire.BundleInfo {
	out := make([]wire.BundleInfo, 0, len(s.Bundles))
	for _, b := range s.Bundles {
		out = append(out, b.Info())
	}
	return out
}

// Load reads the bundles opts names and checks that their roots do not
// overlap. It does not compile them together: engine.NewPolicy does.
func Load(ctx context.Context, opts Options) (*Set, error) {
	set := &Set{}
	if opts.IncludeDefault {
		b, err := Default()
		if err != nil {
			return nil, err
		}
		set.Bundles = append(set.Bundles, b)
	}
	var key []byte
	if opts.VerificationKey != "" {
		k, err := readKey(opts.VerificationKey)
		if err != nil {
			return nil, err
		}
		key = k
	}
	paths := slices.Clone(opts.Paths)
	if opts.HomePolicyDir != "" {
		if _, err := os.Stat(opts.HomePolicyDir); err == nil {
			paths = append([]string{opts.HomePolicyDir}, paths...)
		}
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, wire.Errorf(wire.CodeBundleInvalid, "load bundle %s: %w", p, err).With("bundle", p)
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		b, err := LoadPath(abs, key)
		if err != nil {
			return nil, err
		}
		set.Bundles = append(set.Bundles, b)
	}
	if err := checkRoots(set.Bundles); err != nil {
		return nil, err
	}
	return set, nil
}

// Default parses the default bundle embedded in the binary. Its module
// files are named policies/<file>.rego, as in the source tree.
func Default() (*Bundle, error) {
	loader, err := bundle.NewFSLoader(policies.FS)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "load default bundle: %w", err)
	}
	b, err := bundle.NewCustomReader(loader).
		WithBaseDir("policies").
		WithProcessAnnotations(true).
		WithRegoVersion(ast.RegoV1).
		WithSkipBundleVerification(true).
		Read()
	if err != nil {
		return nil, invalid(DefaultName, err)
	}
	return &Bundle{Name: DefaultName, Bundle: &b}, nil
}

// LoadPath reads the bundle directory or tarball at path. With a key (see
// Options.VerificationKey; nil for none) its signature must verify.
func LoadPath(path string, key []byte) (*Bundle, error) {
	sig, err := peekSignature(path)
	if err != nil {
		return nil, invalid(path, err)
	}
	var vc *bundle.VerificationConfig
	if key != nil {
		if vc, err = verification(key, sig); err != nil {
			return nil, wire.Errorf(wire.CodeSignatureInvalid, "verify bundle %s: %w", path, err).With("bundle", path)
		}
	}
	b, err := read(path, vc)
	if err != nil {
		if vc != nil {
			// Tell a bad signature from a bad bundle: read it again
			// without verification. If that loads, the signature is
			// wrong; if not, report what is wrong with the content.
			_, err2 := read(path, nil)
			if err2 == nil {
				return nil, wire.Errorf(wire.CodeSignatureInvalid, "verify bundle %s: %w", path, err).With("bundle", path)
			}
			err = err2
		}
		return nil, invalid(path, err)
	}
	return &Bundle{Name: path, Bundle: &b, Signed: sig.present, Verified: vc != nil}, nil
}

// read parses the bundle at path, verifying it with vc when not nil.
func read(path string, vc *bundle.VerificationConfig) (bundle.Bundle, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return bundle.Bundle{}, err
	}
	var loader bundle.DirectoryLoader
	if fi.IsDir() {
		loader = bundle.NewDirectoryLoader(path)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return bundle.Bundle{}, err
		}
		defer f.Close()
		loader = bundle.NewTarballLoaderWithBaseURL(f, path)
	}
	r := bundle.NewCustomReader(loader).
		WithProcessAnnotations(true).
		WithRegoVersion(ast.RegoV1)
	if fi.IsDir() && vc == nil {
		// Module files are named by their full path. Not when verifying:
		// a signature names the files relative to the bundle's root (as
		// `opa sign --bundle .` writes them), and OPA's reader checks
		// the names it reads, base directory included, against it; a
		// verified directory's modules are named as a tarball's are.
		r = r.WithBaseDir(path)
	}
	if vc != nil {
		r = r.WithBundleVerificationConfig(vc)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	return r.Read()
}

// CheckRoots refuses a set with two bundles whose roots overlap (as Load
// does): a bundle_invalid error naming both.
func (s *Set) CheckRoots() error { return checkRoots(s.Bundles) }

// checkRoots refuses two bundles whose roots overlap: one would overwrite
// the other's data or rules. A bundle without roots owns all of data.
func checkRoots(bs []*Bundle) error {
	for i, a := range bs {
		for _, b := range bs[i+1:] {
			for _, ra := range a.Info().Roots {
				for _, rb := range b.Info().Roots {
					if bundle.RootPathsOverlap(ra, rb) {
						hint := "give each bundle its own roots in its .manifest; a bundle without a manifest owns all of data"
						if a.Name == DefaultName {
							hint = "to use " + b.Name + " instead of the default bundle, add --no-default-bundle (or policy.no_default_bundle in the config); an extension needs roots of its own, such as extensions/NAME"
						}
						return wire.Errorf(wire.CodeBundleInvalid, "bundles %s and %s overlap: roots %q and %q (%s)",
							a.Name, b.Name, ra, rb, hint).With("bundles", []string{a.Name, b.Name})
					}
				}
			}
		}
	}
	return nil
}

// invalid makes a bundle_invalid error for the bundle called name, with the
// file, row and column of the first Rego error when there is one.
func invalid(name string, err error) error {
	e := wire.Errorf(wire.CodeBundleInvalid, "load bundle %s: %w", name, err).With("bundle", name)
	return withLocation(e, err)
}

// withLocation adds file, row and col details from the first located Rego
// error in err's chain.
func withLocation(e *wire.Error, err error) *wire.Error {
	if loc := Location(err); loc != nil {
		e.With("file", loc.File).With("row", loc.Row).With("col", loc.Col)
	}
	return e
}

// Location returns the location of the first Rego error in err's chain
// that has one, or nil.
func Location(err error) *ast.Location {
	var errs ast.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			if e.Location != nil {
				return e.Location
			}
		}
	}
	var one *ast.Error
	if errors.As(err, &one) && one.Location != nil {
		return one.Location
	}
	return nil
}

// String is the bundle's name and revision, for people.
func (b *Bundle) String() string {
	if rev := b.Bundle.Manifest.Revision; rev != "" {
		return fmt.Sprintf("%s (revision %s)", b.Name, rev)
	}
	return b.Name
}
