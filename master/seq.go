package master

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// allocSeq reserves the next seq for this session. The scheme is part of
// the protocol so that Go, Python and Tcl masters on any host can follow it
// (PROTOCOL.md, "Allocating seq"):
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
func allocSeq(dir string) (int64, error) {
	seqDir := filepath.Join(dir, protocol.DirSeq)
	n, err := readHint(dir)
	if err != nil {
		return 0, err
	}
	for tries := 0; ; tries++ {
		n++
		f, err := os.OpenFile(filepath.Join(seqDir, protocol.SeqName(n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o660)
		if err == nil {
			f.Close()
			writeHint(dir, n)
			return n, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return 0, fmt.Errorf("master: reserve seq %d: %w", n, err)
		}
		if tries > 0 && tries%64 == 0 {
			// The hint is far behind: start again from the largest reservation.
			if m, err := maxReserved(seqDir); err == nil && m > n {
				n = m
			}
		}
	}
}

func readHint(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, protocol.FileSeqHint))
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n >= 0 {
			return n, nil
		}
	}
	return maxReserved(filepath.Join(dir, protocol.DirSeq))
}

func maxReserved(seqDir string) (int64, error) {
	f, err := os.Open(seqDir)
	if err != nil {
		return 0, fmt.Errorf("master: %w: %w", ErrSessionMissing, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	var m int64
	for _, n := range names {
		if v, ok := protocol.ParseSeqName(n); ok && v > m {
			m = v
		}
	}
	return m, nil
}

// writeHint records n unless a larger hint is already there. Losing a race
// here only costs the next allocator a few EEXIST retries.
func writeHint(dir string, n int64) {
	if cur, err := readHintFile(dir); err == nil && cur >= n {
		return
	}
	_ = fsq.WriteAtomic(filepath.Join(dir, protocol.FileSeqHint), []byte(strconv.FormatInt(n, 10)+"\n"), 0o660, fsq.Volatile)
}

func readHintFile(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, protocol.FileSeqHint))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
