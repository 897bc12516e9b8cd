package master

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// BenchmarkCommandByID is a lookup by cmd_id of a queued command in a
// session holding n results: every directory is listed (PROTOCOL.md
// section 19, "Naming a command"), so result/ is listed too. A lookup by
// file name lists nothing.
//
//	go test -run '^$' -bench CommandByID ./master/
func BenchmarkCommandByID(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("results=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			for _, d := range protocol.Dirs {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
					b.Fatal(err)
				}
			}
			for i := range n {
				if err := os.WriteFile(filepath.Join(dir, protocol.DirResult, protocol.CommandName(int64(i+1), fmt.Sprintf("c%d", i))), nil, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			name := protocol.CommandName(int64(n+1), "wanted")
			if err := os.WriteFile(filepath.Join(dir, protocol.DirQueue, name), []byte("{}"), 0o600); err != nil {
				b.Fatal(err)
			}
			s, err := Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			for b.Loop() {
				c, err := s.Command("wanted")
				if err != nil || c.Name != name {
					b.Fatalf("%v %v", c, err)
				}
			}
		})
	}
}
