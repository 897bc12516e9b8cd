package launch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/skillpilot/skillpilot/master"
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
