package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// sessionPath is the path of rel inside s.
func sessionPath(s *master.Session, rel string) string { return filepath.Join(s.Dir(), rel) }

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", master.ErrUsage, fmt.Sprintf(format, args...))
}

// ctxErr is what a wait returns when ctx ends, as in package master: a
// deadline is master.ErrWaitTimeout, a cancellation its cause.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return master.ErrWaitTimeout
	}
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return ctx.Err()
}

// isCommand reports whether name is a command file's name (not a dot-file).
func isCommand(name string) bool {
	_, _, err := protocol.ParseCommandName(name)
	return err == nil && !strings.HasPrefix(name, ".")
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
