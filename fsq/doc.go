// Package fsq is the filesystem layer of SkillPilot's file-based queue:
// the one way the runner, the Go masters, launch and pool reach the files
// of a session directory. It knows nothing about what the files mean.
//
// # Root
//
// OpenRoot opens a session directory and returns a Root, which holds the
// directory open and does every operation relative to that handle: open,
// create, read, write, list, stat, rename, remove, mkdir, chmod. Names
// are slash-separated paths relative to the session ("result/x.json");
// an absolute name, an empty one, or "." or ".." in any component is
// refused (ErrBadName). "." names the session itself where a directory is
// asked for (ReadNames, OpenDir, SyncDir). Files a root returns are named
// by their absolute path, for messages; Abs and RelOf convert. A Root is
// safe for concurrent use. Root.OpenRoot opens a directory of the session
// as a root of its own (a pool's member).
//
// What a Root guarantees, on every operation:
//
//   - No symlink is followed, in any component of a name, the last one
//     included. A directory on the way that is a symlink (or not a
//     directory) is an error wrapping ErrLayout; a symlink as the last
//     component is ErrSymlink for an open, and is itself what Lstat
//     describes, Remove removes, Rename and WriteAtomic replace and
//     TouchDir touches. Only the path given to OpenRoot may pass through
//     symlinks (a home directory behind one): what it names at that moment
//     becomes the root.
//   - Nothing outside the session is reached: no ".." and no absolute
//     names, and no mount point is crossed on the way to a name (a bind
//     mount over a session directory is ErrLayout); a file opened or
//     described (Lstat) at a mount point is ErrLayout too. Directories
//     are resolved with openat2 (RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS,
//     RESOLVE_NO_XDEV), or one component at a time with O_NOFOLLOW and a
//     mount id check where the kernel has no openat2 (ForceWalk).
//   - Nothing is cached: every operation looks its directories up anew,
//     so a directory swapped for a symlink or renamed away (even out of
//     the session) is never written through. Moved reports when the
//     session's path no longer names the directory the root holds.
//   - No open blocks: ReadFile, OpenRegular, OpenAppend and OpenLog open
//     with O_NONBLOCK and refuse anything but a regular file
//     (ErrNotRegular), so a FIFO planted in the session is refused, never
//     waited on; CreateNew, CreateTemp and WriteAtomic's temporary files
//     are created exclusively (O_EXCL), and directories are opened with
//     O_DIRECTORY. OpenFile alone opens with exactly the flags it is given
//     (plus O_NOFOLLOW).
//   - Reads are bounded: ReadFile reads at most limit+1 bytes, whatever
//     the file's size or growth (ErrTooLarge beyond limit).
//   - Nothing is written through a hard link: OpenAppend, OpenLog and
//     Chmod refuse a file with more than one link (ErrHardLink), and
//     WriteAtomic never writes into an existing file; Overwrite, which
//     does, refuses one with a second link too.
//
// A refusal is an error that wraps one of the values above (test with
// errors.Is) and names the path.
//
// # Writing and renaming
//
// WriteAtomic replaces a file so that a reader sees the old content or the
// new, never a mix: a new temporary file (a dot-file beside the target,
// or in a directory of the caller's choosing with WriteAtomicVia) renamed
// onto the target, durable as its Durability says. A temporary file a
// failed write could not remove is removed later (RemoveOrLater,
// SweepLater). RenameNoReplace never replaces an existing target, also on
// NFS (link plus unlink). Claim moves a file to exactly one of several
// racing claimers, on one host or several; a lost race is not an error.
// OpenLog opens a JSON Lines log (Log) whose torn last line, left by a
// crash, is cut off at open. NewSpares keeps empty files ready so a
// writer on a critical path renames instead of creating.
// WriteAtomicReaped replaces a file by exchanging it with the new one
// (Exchange) and leaves the old one to a Reaper, so that its deletion,
// which on some disks waits for the disk, is off the writer's path.
// Overwrite writes a small record in place, for hints whose readers
// survive a torn read (seq/hint): no file made, none deleted.
//
// It works on NFS: it needs only openat, renameat, linkat and unlinkat
// (Exchange, which NFS lacks, says errors.ErrUnsupported there, and
// WriteAtomicReaped renames instead).
// Revalidate and TouchDir work around NFS clients' cached lookups.
//
// # Watching
//
// Watch combines fsnotify with a periodic rescan. On network filesystems
// (NFS, SMB, FUSE; see FSTypeOf) inotify sees only changes made through
// the local mount, so the rescan is then the only mechanism that works;
// see PROTOCOL.md, "Shared filesystems".
//
// # Files
//
// root.go opens roots and walks names to directories; read.go reads,
// lists and stats; write.go creates, writes, changes and removes;
// rename.go renames and claims; jsonl.go is the log; spares.go the spare
// files; mount_linux.go the mount point checks; watch.go the watcher.
// path.go has the few functions by path that remain for what is not
// reached through a root (a file named on a command line, readers of a
// session by path, tests): each is a Root method's twin that checks the
// last element of its path only.
package fsq
