package runner

import (
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// What cannot apply to a vault mounted already is refused before anything
// is done; a --readonly run, and a run of another vault, are not attached.
func TestCheckAttached(t *testing.T) {
	a := &Attached{Vault: "app", Dir: "/srv/app"} // no live session
	r := &Runner{Attached: a}
	for _, c := range []struct {
		name     string
		vault    string
		req      Request
		attached bool
		code     wire.Code
	}{
		{"mountpoint", "app", Request{Mountpoint: "/mnt/x"}, true, wire.CodeInvalidInput},
		{"materialize", "app", Request{MountMode: ModeMaterialize}, true, wire.CodeInvalidInput},
		{"not mounted any more", "app", Request{}, true, wire.CodeMountFailed},
		{"readonly", "app", Request{Readonly: true, Mountpoint: "/mnt/x"}, false, ""},
		{"another vault", "other", Request{Mountpoint: "/mnt/x"}, false, ""},
	} {
		x := &execution{r: r, req: c.req, info: vault.Info{Name: c.vault}}
		if got := x.attached() != nil; got != c.attached {
			t.Errorf("%s: attached %v, want %v", c.name, got, c.attached)
		}
		err := x.checkAttached()
		if c.code == "" && err != nil || c.code != "" && !wire.HasCode(err, c.code) {
			t.Errorf("%s: %v, want %q", c.name, err, c.code)
		}
	}
}

// An attached run's view shows the vault at the workspace's directory,
// with a sandbox and without one.
func TestResolveViewAttached(t *testing.T) {
	r := &Runner{}
	vw, err := r.resolveView(Request{}, func() error { return nil }, "/srv/app")
	if err != nil || vw.input.Workspace != "/srv/app" || vw.input.Mode != wire.SandboxNamespaces {
		t.Errorf("namespaces: %+v %v", vw.input, err)
	}
	vw, err = r.resolveView(Request{Sandbox: SandboxNone}, nil, "/srv/app")
	if err != nil || vw.input.Workspace != "/srv/app" || vw.input.Mode != wire.SandboxNone {
		t.Errorf("none: %+v %v", vw.input, err)
	}
}
