package fsq

import "golang.org/x/sys/unix"

// networkFS names the filesystems, by their statfs(2) magic number, where
// inotify does not see changes made by other hosts. A switch, not a
// package map: a map is built at every start of every program (issue 44).
func networkFS(magic int64) (string, bool) {
	switch magic {
	case 0x6969:
		return "nfs", true
	case 0x517B:
		return "smb", true
	case 0xFF534D42:
		return "cifs", true
	case 0xFE534D42:
		return "smb2", true
	case 0x65735546:
		return "fuse", true
	case 0x01021997:
		return "9p", true
	case 0x00C36400:
		return "ceph", true
	case 0x0BD00BD0:
		return "lustre", true
	case 0x47504653:
		return "gpfs", true
	case 0x5346414F:
		return "afs", true
	case 0x73757245:
		return "coda", true
	}
	return "", false
}

// FSTypeOf names the filesystem a statfs(2) describes (Root.Statfs of a
// session directory, say) and reports whether it is a network (or FUSE)
// filesystem, on which inotify does not see other hosts' changes.
func FSTypeOf(st *unix.Statfs_t) (name string, network bool) {
	if n, ok := networkFS(int64(st.Type)); ok {
		return n, true
	}
	switch int64(st.Type) {
	case 0xEF53:
		return "ext4", false
	case 0x01021994:
		return "tmpfs", false
	case 0x58465342:
		return "xfs", false
	case 0x9123683E:
		return "btrfs", false
	case 0x794C7630:
		return "overlayfs", false
	}
	return "local", false
}
