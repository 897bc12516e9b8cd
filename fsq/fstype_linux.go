package fsq

import "golang.org/x/sys/unix"

// Filesystem magic numbers from statfs(2) of filesystems where inotify does
// not see changes made by other hosts.
var networkFS = map[int64]string{
	0x6969:     "nfs",
	0x517B:     "smb",
	0xFF534D42: "cifs",
	0xFE534D42: "smb2",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x00C36400: "ceph",
	0x0BD00BD0: "lustre",
	0x47504653: "gpfs",
	0x5346414F: "afs",
	0x73757245: "coda",
}

// FSTypeOf names the filesystem a statfs(2) describes (Root.Statfs of a
// session directory, say) and reports whether it is a network (or FUSE)
// filesystem, on which inotify does not see other hosts' changes.
func FSTypeOf(st *unix.Statfs_t) (name string, network bool) {
	if n, ok := networkFS[int64(st.Type)]; ok {
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
