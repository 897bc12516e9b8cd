//go:build !lean

package cli

import (
	"path/filepath"

	"github.com/skillpilot/skillpilot/fsq"
)

// leanVerbs changes nothing in the full CLI (lean.go: the lean master runs
// report, standin and diff in master-history).
func leanVerbs([]verb) {}

// writeOut writes data to the file a user named (report and standin
// --out, which the lean master leaves to master-history): replaced whole
// so that a reader sees the old content or the new, never a mix, mode 0644
// (fsq.Root.WriteAtomic in the directory path names it in).
func writeOut(path string, data []byte) error {
	r, err := fsq.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer r.Close()
	return r.WriteAtomic(filepath.Base(path), data, 0o644, fsq.Volatile)
}
