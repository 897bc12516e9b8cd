package master

import "context"

// UsageError is an error wrapping ErrUsage with the message format and
// args give, for the packages beside this one (launch, pool) whose
// callers branch on ErrUsage as on this package's.
func UsageError(format string, args ...any) error { return usageErr(format, args...) }

// ContextEndError is what a wait of this package returns when ctx ends: a
// deadline is ErrWaitTimeout, a cancellation its cause. For the packages
// beside this one (launch, pool), so their waits end as this package's do.
func ContextEndError(ctx context.Context) error { return ctxErr(ctx) }
