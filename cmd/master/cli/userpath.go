package cli

// Files the master CLI reaches by a path rather than through a session's
// root: a file the user names (--out) and the meta.log a clean reads.
// Each is opened through the root of the directory the path names it in,
// under fsq.Root's rules for its last element.

import (
	"os"
	"path/filepath"

	"github.com/skillpilot/skillpilot/fsq"
)

// openRegular opens the file at path for reading: a regular file only,
// never through a symlink in its last element, never blocking on a FIFO
// (fsq.Root.OpenRegular in the directory path names it in).
func openRegular(path string) (*os.File, error) {
	r, err := fsq.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.OpenRegular(filepath.Base(path))
}
