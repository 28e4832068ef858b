package mount

import "encoding/binary"

// aclAccess is the xattr through which tools (cp -a, tar) set POSIX ACLs.
// On a local file system the kernel applies a minimal ACL as the mode; a
// FUSE file system has to do it itself.
const aclAccess = "system.posix_acl_access"

// ACL tags (linux/posix_acl_xattr.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclMode reads an ACL xattr and returns the permission bits it implies and
// whether it is minimal (expressible by the mode alone).
func aclMode(b []byte) (perm uint32, minimal, ok bool) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != 2 || (len(b)-4)%8 != 0 {
		return 0, false, false
	}
	var user, group, other, mask uint32
	hasMask := false
	minimal = true
	for e := b[4:]; len(e) >= 8; e = e[8:] {
		tag := binary.LittleEndian.Uint16(e)
		p := uint32(binary.LittleEndian.Uint16(e[2:])) & 7
		switch tag {
		case aclUserObj:
			user = p
		case aclGroupObj:
			group = p
		case aclOther:
			other = p
		case aclMask:
			mask, hasMask = p, true
		case aclUser, aclGroup:
			minimal = false
		default:
			return 0, false, false
		}
	}
	if hasMask {
		group = mask
	}
	return user<<6 | group<<3 | other, minimal, true
}
