package vault

import (
	"encoding/binary"
	"sort"

	"avfs/wire"
)

// Extended attributes live in the inode row (so checkpoints, forks and
// restore carry them) as a sorted list of (name, value) pairs, each
// length-prefixed with a uvarint.

// Limits as on Linux.
const (
	maxXattrName  = 255
	maxXattrValue = 64 * 1024
	maxXattrTotal = 64 * 1024
)

// Xattr flags, as in setxattr(2).
const (
	XattrCreate  = 1
	XattrReplace = 2
)

func decodeXattrs(b []byte) (map[string][]byte, error) {
	m := map[string][]byte{}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, wire.Errorf(wire.CodeIntegrity, "extended attributes are damaged")
		}
		name := string(b[k : k+int(n)])
		b = b[k+int(n):]
		n, k = binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, wire.Errorf(wire.CodeIntegrity, "extended attributes are damaged")
		}
		m[name] = append([]byte(nil), b[k:k+int(n)]...)
		b = b[k+int(n):]
	}
	return m, nil
}

func encodeXattrs(m map[string][]byte) []byte {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b []byte
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendUvarint(b, uint64(len(m[n])))
		b = append(b, m[n]...)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}
