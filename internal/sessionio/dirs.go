package sessionio

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// MasterDirMode is the mode of a directory a master makes below r
// (PROTOCOL.md 19.1, "Files"), whatever the umask: a session's own
// directory (protocol.Dirs: seq/ in a session an older runner made, or
// the ones launch makes before the first runner) gets the runner's mode
// for it (protocol.DirMode: 0700 in a private session, 2770 or 2750 in a
// group-shared one), because the runner refuses a group-writable one in a
// private session; any other (withdrawn/, moved/, forward/, a pool's
// affinity/ and jobs/) is 0770, so that a group sharing the session or
// pool can write where masters write. A setgid parent's bit is kept.
func MasterDirMode(r *fsq.Root, name string) os.FileMode {
	if !slices.Contains(protocol.Dirs, name) {
		return 0o770
	}
	fi, err := r.Stat()
	return protocol.DirMode(name, err == nil && fi.Mode()&fs.ModeSetgid != 0)
}

// MkdirMaster makes the directory name below r, and its missing parents,
// each with MasterDirMode; an existing one is left as it is.
func MkdirMaster(r *fsq.Root, name string) error {
	if d := path.Dir(name); d != "." && d != "/" {
		if err := MkdirMaster(r, d); err != nil {
			return err
		}
	}
	if err := r.MkdirPerm(name, MasterDirMode(r, name)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}
