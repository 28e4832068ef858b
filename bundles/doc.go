// Package bundles loads the policy bundles avfs evaluates: the default bundle
// embedded in the binary (package policies), bundle directories, tarballs
// made by `opa build`, the user's $AVFS_HOME/policy directory and the
// bundles named in the configuration, and rebuilds the bundles OPA's bundle
// plugin activated into its store (FromStore). It honours each manifest's
// roots and revision, refuses bundles whose roots overlap, and verifies
// signed bundles (.signatures.json) with a PEM public key or an HMAC secret.
// Errors are *wire.Error with code bundle_invalid (naming the bundle and,
// for Rego errors, the file and line) or signature_invalid.
package bundles
