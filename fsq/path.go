package fsq

// CreateFile is the one function here that takes a path: every other
// reaches files through a Root (OpenRoot, Root.OpenRoot), a file a user
// names on the command line included (a Root of its directory).

import (
	"os"

	"golang.org/x/sys/unix"
)

// CreateFile opens a regular file like os.OpenFile, without registering it
// with the runtime's network poller (regular files cannot use it anyway):
// that saves four fcntl/epoll_ctl system calls per file on the runner's
// critical path. flag is os.O_* flags; O_CLOEXEC is added.
func CreateFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := unix.Open(path, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
