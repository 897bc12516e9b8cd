package master

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"os"
	"slices"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// LeaseStatus is the lease as a master can see it.
type LeaseStatus struct {
	LeaseID string `json:"lease_id,omitempty"`
	TTLMS   int64  `json:"ttl_ms,omitempty"`
	Owner   string `json:"owner,omitempty"`
	// Remaining is an estimate of the time left before the runner sees
	// the lease expire: with ttl_ms, ttl minus the lease file's age by the
	// session's filesystem clock (against the heartbeat file's mtime);
	// with only expires_at, expires_at minus the runner's last heartbeat
	// time. Negative: expired.
	Remaining time.Duration `json:"remaining_ns"`
	// Error says why the runner cannot understand lease.json (state.json's
	// lease_error), or why the master cannot.
	Error string `json:"error,omitempty"`
}

// ResultBrief is one line of a status's recent results.
type ResultBrief struct {
	CmdID      string              `json:"cmd_id"`
	Seq        int64               `json:"seq"`
	Status     protocol.Status     `json:"status"`
	ExitReason protocol.ExitReason `json:"exit_reason,omitempty"`
	DurationMS int64               `json:"duration_ms"`
	EndTS      protocol.Time       `json:"end_ts,omitzero"`
	TraceID    string              `json:"trace_id,omitempty"`
	ran        bool                // run in the tool (counted in commands_done)
}

// stateExtra holds state.json fields newer runners write (PROTOCOL.md
// section 8); older runners leave them out.
type stateExtra struct {
	CurrentLastLine *string             `json:"current_last_line"`
	CurrentQuietMS  *int64              `json:"current_quiet_ms"`
	CurrentOutBytes *int64              `json:"current_output_bytes"`
	SkippedCount    int64               `json:"skipped_count"`
	RejectedCount   int64               `json:"rejected_count"`
	LeaseError      string              `json:"lease_error"`
	DiskFull        bool                `json:"disk_full"`
	CurrentTraceID  string              `json:"current_trace_id"`
	CurrentLabels   map[string]string   `json:"current_labels"`
	Retention       *protocol.Retention `json:"retention"`
}

// details fills the parts of st a person reads: the running command's last
// line, the lease, the last five results. stateCmd is the command
// state.json names (its last line and quiet time are that command's).
func (s *Session) details(st *Status, hb protocol.Heartbeat, stateCmd string) {
	var ex stateExtra
	if b, _, err := s.io.ReadFile(protocol.FileState, sessionio.MaxStateFile, false); err == nil {
		_ = json.Unmarshal(b, &ex) // Fields it cannot read stay zero.
	}
	st.SkippedCount, st.RejectedCount, st.DiskFull = ex.SkippedCount, ex.RejectedCount, ex.DiskFull
	st.Retention = ex.Retention
	if st.CurrentCmdID != "" {
		if st.CurrentCmdID != stateCmd {
			ex.CurrentLastLine, ex.CurrentQuietMS, ex.CurrentOutBytes = nil, nil, nil
		}
		// The heartbeat and state.json each carry the count as of their
		// own write; it only grows while the command runs, so the larger is
		// the newer (and goes with the last line state.json shows).
		if ex.CurrentOutBytes != nil && *ex.CurrentOutBytes > st.CurrentOutBytes {
			st.CurrentOutBytes = *ex.CurrentOutBytes
		}
		if ex.CurrentLastLine != nil {
			st.CurrentLastLine = *ex.CurrentLastLine
		} else if c, err := s.Command(st.CurrentCmdID); err == nil {
			st.CurrentLastLine = s.lastLine(protocol.DirOutput + "/" + protocol.OutputName(c.Name))
		}
		if ex.CurrentQuietMS != nil {
			q := time.Duration(*ex.CurrentQuietMS) * time.Millisecond
			st.CurrentQuiet = &q
		}
		if st.CurrentCmdID == stateCmd {
			st.CurrentTraceID, st.CurrentLabels = ex.CurrentTraceID, ex.CurrentLabels
		}
	}
	st.Lease = s.leaseStatus(hb, ex.LeaseError)
	st.LastResults = s.lastResults(5)
}

// lastLine returns the last non-empty line of a file's last 4 KiB, cut at
// 256 bytes.
func (s *Session) lastLine(name string) string {
	f, err := s.io.OpenRegular(name, false)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	off := max(fi.Size()-4096, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 4096))
	b = bytes.TrimRight(b, "\r\n")
	if i := bytes.LastIndexAny(b, "\r\n"); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 256 {
		b = b[len(b)-256:]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

func (s *Session) leaseStatus(hb protocol.Heartbeat, runnerErr string) *LeaseStatus {
	b, fi, err := s.io.ReadFile(protocol.FileLease, 1<<16, false)
	if os.IsNotExist(err) {
		if runnerErr == "" {
			return nil
		}
		return &LeaseStatus{Error: runnerErr}
	}
	ls := &LeaseStatus{Error: runnerErr}
	if err != nil {
		ls.Error = err.Error()
		return ls
	}
	l, err := protocol.ParseLease(b)
	if err != nil {
		if ls.Error == "" {
			ls.Error = err.Error()
		}
		return ls
	}
	ls.LeaseID, ls.TTLMS, ls.Owner = l.LeaseID, l.TTLMS, l.Owner
	switch {
	case l.TTLMS > 0:
		if hbi, err := s.io.RegularInfo(protocol.FileHeartbeat); err == nil {
			age := max(hbi.ModTime().Sub(fi.ModTime()), 0)
			ls.Remaining = time.Duration(l.TTLMS)*time.Millisecond - age
		}
	case !hb.Timestamp.IsZero():
		ls.Remaining = l.ExpiresAt.Sub(hb.Timestamp.Time)
	}
	return ls
}

// lastResults reads the n results with the highest seqs, newest first. It
// lists result/ (names only) and reads n files.
func (s *Session) lastResults(n int) []ResultBrief {
	names, err := s.io.ReadNames(protocol.DirResult)
	if err != nil {
		return nil
	}
	type named struct {
		name string
		seq  int64
	}
	var all []named
	for _, name := range names {
		if seq, _, err := protocol.ParseCommandName(name); err == nil {
			all = append(all, named{name, seq})
		}
	}
	slices.SortFunc(all, func(a, b named) int { return cmp.Compare(b.seq, a.seq) })
	var out []ResultBrief
	for _, e := range all[:min(n, len(all))] {
		b, _, err := s.io.ReadFile(protocol.DirResult+"/"+e.name, protocol.MaxCommandSize, false)
		if err != nil {
			continue
		}
		var r protocol.Result
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		if r.CmdID == "" {
			_, r.CmdID, _ = protocol.ParseCommandName(e.name)
		}
		out = append(out, ResultBrief{CmdID: r.CmdID, Seq: e.seq, Status: r.Status, ExitReason: r.ExitReason,
			DurationMS: r.Stats.DurationMS, EndTS: r.EndTS, TraceID: r.TraceID, ran: r.ToolStart > 0})
	}
	return out
}
