// Package fsq holds the filesystem primitives a file-based queue needs:
// atomic replacement of a file (WriteAtomic), claiming a file by rename
// (Claim), reading a file another process may be writing without following
// symlinks (ReadFile), an fsynced JSON Lines log that repairs a torn last
// line when opened (OpenLog), and a directory watcher that combines fsnotify
// with a periodic rescan (Watch), and Root: the same operations relative to
// a session directory held open, never resolving a symlink in any
// component (the runner's and the Go master's only way to a session's
// files). It knows nothing about what the files mean.
//
// On network filesystems (NFS, SMB, FUSE) inotify sees only changes made
// through the local mount, so Watch's rescan is then the only mechanism that
// works; see PROTOCOL.md, "Shared filesystems".
//
// Guarantees: a file written with WriteAtomic is seen whole or not at all
// under its final name (durable as its Durability says); Claim moves a
// file to exactly one claimer, also when NFS retries a rename; no reader
// here follows a symlink in the last component, blocks on a FIFO or reads
// more than its limit (ErrSymlink, ErrNotRegular, ErrTooLarge); a log
// opened with OpenLog never keeps a torn last line; nothing done through a
// Root reads, writes, lists or removes anything outside its directory or
// through a symlink (ErrLayout, ErrSymlink, ErrBadName).
package fsq
