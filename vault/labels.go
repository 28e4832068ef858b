package vault

import (
	"context"
	"sort"
	"strings"
	"unicode/utf8"

	"avfs/wire"
)

// Tags and metadata
//
// A vault entry's tags and KEY=VALUE metadata are extended attributes of
// its inode in the user.avfs namespace ("user.avfs.tag.NAME", empty, and
// "user.avfs.meta.KEY", the value): like every attribute they are in the
// history, the checkpoints, the forks and the change summaries, and a
// mount shows them (getfattr -d -m user.avfs). They are the user's data:
// avfs decides nothing by them, and a command that writes the mount can
// change them like any other attribute.

// Prefixes of the attribute names of tags and metadata.
const (
	TagPrefix  = "user.avfs.tag."
	MetaPrefix = "user.avfs.meta."
)

// LabelEdit is a change of an entry's tags and metadata.
type LabelEdit struct {
	AddTags, RemoveTags []string
	SetMeta             map[string]string
	RemoveMeta          []string
}

// LabelsOf reads the tags and metadata among an entry's attributes.
func LabelsOf(path string, xattrs map[string][]byte) wire.Labels {
	l := wire.Labels{Kind: wire.LabelsKind, Path: path, PathB64: wire.B64(path), Tags: []string{}, Meta: map[string]string{}}
	for name, value := range xattrs {
		if tag, ok := strings.CutPrefix(name, TagPrefix); ok {
			l.Tags = append(l.Tags, tag)
		} else if key, ok := strings.CutPrefix(name, MetaPrefix); ok {
			l.Meta[key] = string(value)
		}
	}
	sort.Strings(l.Tags)
	return l
}

// Labels returns the tags and metadata of the entry at p (not following
// a final symlink).
func (v *Vault) Labels(ctx context.Context, p string) (wire.Labels, error) {
	e, err := v.Stat(ctx, p)
	if err != nil {
		return wire.Labels{}, err
	}
	return v.EntryLabels(ctx, e)
}

// EntryLabels returns the tags and metadata of an entry Walk or Stat gave.
func (v *Vault) EntryLabels(ctx context.Context, en Entry) (wire.Labels, error) {
	m, err := v.xattrsOf(ctx, en.Ino)
	if err != nil {
		return wire.Labels{}, err
	}
	return LabelsOf(en.Path, m), nil
}

// Label applies edit to the entry at p in one transaction (audited as
// "label") and returns its labels after it. A name or key that is empty,
// holds a NUL or is not UTF-8, or a value that is not UTF-8, is
// invalid_input; removing one the entry does not have is not an error.
// Nothing changes when any part is refused.
func (v *Vault) Label(ctx context.Context, p string, edit LabelEdit) (wire.Labels, error) {
	for _, names := range [][]string{edit.AddTags, edit.RemoveTags, edit.RemoveMeta} {
		for _, n := range names {
			if err := validLabel(n); err != nil {
				return wire.Labels{}, err
			}
		}
	}
	for k, val := range edit.SetMeta {
		if err := validLabel(k); err != nil {
			return wire.Labels{}, err
		}
		if !utf8.ValidString(val) || len(val) > maxXattrValue {
			return wire.Labels{}, wire.Errorf(wire.CodeInvalidInput, "metadata %q: the value must be UTF-8 text of at most %d bytes", k, maxXattrValue)
		}
	}
	e, err := v.Stat(ctx, p)
	if err != nil {
		return wire.Labels{}, err
	}
	var after map[string][]byte
	details := map[string]any{"add_tags": edit.AddTags, "remove_tags": edit.RemoveTags, "set_meta": edit.SetMeta, "remove_meta": edit.RemoveMeta}
	err = v.editXattrs(ctx, e.Ino, "label", details, func(m map[string][]byte) error {
		for _, t := range edit.RemoveTags {
			delete(m, TagPrefix+t)
		}
		for _, t := range edit.AddTags {
			m[TagPrefix+t] = []byte{}
		}
		for _, k := range edit.RemoveMeta {
			delete(m, MetaPrefix+k)
		}
		for k, val := range edit.SetMeta {
			m[MetaPrefix+k] = []byte(val)
		}
		after = m
		return nil
	})
	if err != nil {
		return wire.Labels{}, err
	}
	return LabelsOf(e.Path, after), nil
}

// validLabel checks a tag name or metadata key.
func validLabel(n string) error {
	if n == "" || strings.ContainsRune(n, 0) || !utf8.ValidString(n) || len(n) > maxXattrName-len(MetaPrefix) {
		return wire.Errorf(wire.CodeInvalidInput, "tag or metadata key %q: want 1 to %d bytes of UTF-8 text without NUL", n, maxXattrName-len(MetaPrefix))
	}
	return nil
}

// xattrsOf returns the extended attributes of ino.
func (v *Vault) xattrsOf(ctx context.Context, ino uint64) (map[string][]byte, error) {
	var m map[string][]byte
	err := v.view(ctx, "labels", func(q querier, _ state) error {
		in, err := getInode(ctx, q, int64(ino))
		if err != nil {
			return err
		}
		m, err = decodeXattrs(in.xattrs)
		return err
	})
	return m, err
}
