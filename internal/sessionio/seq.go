package sessionio

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// AllocSeq reserves the next seq in the session r holds. The scheme is
// part of the protocol so that Go, Python and Tcl masters on any host can
// follow it (PROTOCOL.md, "Allocating seq"):
//
//  1. read seq/hint (a decimal number; missing or garbage: list seq/ and
//     take the largest reservation);
//  2. for n = hint+1, hint+2, ...: create seq/<n, 10 digits> with
//     O_CREAT|O_EXCL; the first create that succeeds owns n;
//  3. rewrite seq/hint to n (best effort, tmp + rename).
//
// Exclusive create is atomic on local filesystems and on NFS v3 and v4
// (the server decides), needs no lock daemon, and Tcl's open offers it
// (EXCL), so the scheme works where flock does not.
func AllocSeq(r *fsq.Root) (int64, error) {
	n, hint, err := ReserveSeq(r)
	if err == nil && hint < n {
		WriteHint(r, n)
	}
	return n, err
}

// ReserveSeq performs AllocSeq's steps 1 and 2: it returns the seq it
// reserved and the hint it started from. Step 3 is WriteHint(r, n) when
// hint < n.
func ReserveSeq(r *fsq.Root) (n, hint int64, err error) {
	if hint, err = readHint(r); err != nil {
		return 0, 0, err
	}
	n = hint
	for tries := 0; ; tries++ {
		n++
		if n > maxSeq {
			return 0, 0, fmt.Errorf("master: seq %d would not fit a command file name (at most %d)", n, int64(maxSeq))
		}
		err := createExcl(r, protocol.DirSeq+"/"+protocol.SeqName(n))
		if err == nil {
			return n, hint, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return 0, 0, Wrapf(err, "reserve seq %d", n)
		}
		if tries > 0 && tries%64 == 0 {
			// The hint is far behind: start again from the largest reservation.
			if m, err := maxReserved(r); err == nil && m > n {
				n = m
			}
		}
	}
}

// maxSeq is the largest seq a command file name can carry (18 digits).
const maxSeq = 999_999_999_999_999_999

// readHint reads seq/hint as untrusted input: no symlink followed, no
// blocking on a FIFO, at most 64 bytes, at most 18 digits. Anything else
// is no hint, and the largest reservation in seq/ is used instead.
func readHint(r *fsq.Root) (int64, error) {
	if n, err := readHintFile(r); err == nil {
		return n, nil
	}
	return maxReserved(r)
}

func maxReserved(r *fsq.Root) (int64, error) {
	names, err := r.ReadNames(protocol.DirSeq)
	if errors.Is(err, fsq.ErrLayout) {
		return 0, err // seq/ swapped for a symlink: io_error, not a missing session.
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrSessionMissing, err)
	}
	var m int64
	for _, n := range names {
		if v, ok := protocol.ParseSeqName(n); ok && v > m {
			m = v
		}
	}
	return m, nil
}

// WriteHint records n in seq/hint (not fsynced) unless a larger hint is
// already there. Losing a race here only costs the next allocator a few
// EEXIST retries. The hint is a record of fixed width (HintRecord),
// written in place over the one there (fsq.Overwrite: nothing deleted,
// which is what a rename over the old hint cost, 1.2 ms of a 4 ms submit
// on BENCHMARKS.md's machine); a hint that is missing, longer, linked or
// not a plain file is replaced whole (tmp + rename) by the same record.
// A reader that catches the write half done reads some other number: a
// higher one leaves a gap in the seqs, a lower one costs EEXIST retries
// (or, more than 4,096 below, may reuse a seq retention pruned), and the
// exclusive create still decides who owns a seq (PROTOCOL.md sections 5
// and 23).
func WriteHint(r *fsq.Root, n int64) {
	if cur, err := readHintFile(r); err == nil && cur >= n {
		return
	}
	rec := HintRecord(n)
	if r.Overwrite(protocol.FileSeqHint, rec) == nil {
		return
	}
	_ = r.WriteAtomic(protocol.FileSeqHint, rec, 0o660, fsq.Volatile)
}

// hintWidth is the width of seq/hint's number field: 19 characters, the
// most a seq that fits an int64 has.
const hintWidth = 19

// HintRecord is seq/hint's content for n: n in decimal, padded with
// spaces to 19 characters, and a newline (20 bytes). Every hint has the
// same length, so one written over another leaves no tail; every master
// strips the spaces when it reads it (PROTOCOL.md section 5).
func HintRecord(n int64) []byte {
	b := strconv.AppendInt(make([]byte, 0, hintWidth+1), n, 10)
	for len(b) < hintWidth {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// readHintFile reads seq/hint: at most 64 bytes, never followed, never
// blocked on.
func readHintFile(r *fsq.Root) (int64, error) {
	b, _, err := r.ReadFile(protocol.FileSeqHint, 64)
	if err != nil {
		return 0, err
	}
	t := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > maxSeq || len(t) > 18 {
		return 0, fmt.Errorf("master: seq/hint %q is not a seq", t)
	}
	return n, nil
}

// createExcl creates name exclusively (O_EXCL: an existing entry, symlink
// or not, is os.ErrExist) with mode 0660 whatever the umask (PROTOCOL.md
// §19.1): the create's mode is narrowed by the umask (0640 under 022), so
// it is set again when it was.
func createExcl(r *fsq.Root, name string) error {
	f, err := r.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o660)
	if err != nil {
		return err
	}
	defer f.Close()
	_ = fsq.SetMode(f, 0o660) // Best effort: the seq is reserved either way; only the empty file's mode would be off.
	return nil
}
