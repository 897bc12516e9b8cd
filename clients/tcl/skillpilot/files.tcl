# Names and ids of the SkillPilot Tcl master (PROTOCOL.md sections 2, 5
# and 8): ids, command names, JSON files and seq allocation by exclusive
# create. Every file operation is in fs.tcl (::skillpilot::fs). Nothing
# here touches the host interpreter's rand() or its global state.

namespace eval ::skillpilot {
    variable seqWidth 10
}

# Throw raises a SkillPilot error from the caller: -errorcode {SKILLPILOT
# CODE ...}. CODE is one of the names in exitcode.
proc ::skillpilot::Throw {code msg args} {
    return -code error -level 2 -errorcode [list SKILLPILOT $code {*}$args] $msg
}

# ThrowCtx is Throw with a context: a dict of the facts beside code and
# message (cmd_id, dir, grace_ms, resume_cursor, ...), the same keys as the
# Go master's ErrorContext (PROTOCOL.md section 19, "Errors carry
# context"). A caller finds it in its catch options: [dict get $opts
# -context].
proc ::skillpilot::ThrowCtx {code msg ctx args} {
    return -code error -level 2 -errorcode [list SKILLPILOT $code {*}$args] -context $ctx $msg
}

# ReplyContext is the context of a refused request: the reply's own
# context as the runner wrote it (the invalid field, the request file, a
# limit), then op, req_id, outcome, and the named command and its state
# when the reply has them (these win).
proc ::skillpilot::ReplyContext {reply} {
    set ctx [dict create]
    if {[dict exists $reply context]} { set ctx [dict get $reply context] }
    foreach k {op req_id outcome cmd_id cmd_state} {
        if {[dict exists $reply $k] && [dict get $reply $k] ne ""} { dict set ctx $k [dict get $reply $k] }
    }
    return $ctx
}

# RandomHex returns n random bytes as hex (see fs::random_hex).
proc ::skillpilot::RandomHex {n} {
    return [fs::random_hex $n]
}

# new_id returns a UUID version 7: 48 bits of Unix milliseconds, then
# random bits, so that ids sort by creation time.
proc ::skillpilot::new_id {} {
    set r [RandomHex 10]
    set h [format %012llx [::tcl::clock::milliseconds]]
    append h 7 [string range $r 0 2]
    append h [format %x [expr {0x8 | ("0x[string index $r 3]" & 0x3)}]] [string range $r 4 18]
    return "[string range $h 0 7]-[string range $h 8 11]-[string range $h 12 15]-[string range $h 16 19]-[string range $h 20 31]"
}

proc ::skillpilot::valid_id {id} {
    return [expr {[regexp {^[A-Za-z0-9._-]{1,128}$} $id] && $id ni {. ..}}]
}

# parse_name returns {seq id} of cmd_<seq>_<id>.json (prefix cmd) or
# req_<seq>_<id>.json, or "" for any other name. The id is matched whole:
# cmd_1_a_b.json has the id a_b, never b.
proc ::skillpilot::parse_name {name {prefix cmd}} {
    if {![regexp "^${prefix}_(\[0-9\]{1,18})_(.+)\\.json\$" $name -> seq id] || ![valid_id $id]} {
        return ""
    }
    return [list [scan $seq %lld] $id]
}

proc ::skillpilot::now_iso {} {
    set ms [::tcl::clock::milliseconds]
    return "[::tcl::clock::format [expr {$ms / 1000}] -format %Y-%m-%dT%H:%M:%S -gmt 1].[format %03d [expr {$ms % 1000}]]Z"
}

# read_json parses the JSON file dir/sub/name; "" if it does not exist.
# With quiet, any error also gives "" (for liveness probes). The older
# form "read_json PATH ?quiet?" reads the caller's path.
proc ::skillpilot::read_json {args} {
    if {[llength $args] <= 2} {
        lassign $args path quiet
        set args [list [file dirname $path] "" [file tail $path] $quiet]
    }
    lassign $args dir sub name quiet
    if {[catch {
        set text [fs::read_file $dir $sub $name found]
        set v [expr {$found ? [json::parse $text] : ""}]
    } msg opts]} {
        if {$quiet ne "" && $quiet} { return "" }
        if {[lindex [dict get $opts -errorcode] 1] eq "JSON"} {
            Throw IO_ERROR "[fs::path $dir $sub $name]: not valid JSON: $msg"
        }
        return -options $opts $msg
    }
    return $v
}

proc ::skillpilot::MaxReserved {dir} {
    set m 0
    foreach f [fs::names $dir seq {[0-9]*}] {
        if {[regexp {^[0-9]{1,18}$} $f] && [scan $f %lld] > $m} { set m [scan $f %lld] }
    }
    return $m
}

proc ::skillpilot::ReadHint {dir} {
    if {[catch {fs::read_file $dir seq hint found 64} txt] || !$found} { return -1 }
    set txt [string trim $txt]
    if {![regexp {^[0-9]{1,18}$} $txt]} { return -1 }
    return [scan $txt %lld]
}

# alloc_seq reserves the next seq of the session (PROTOCOL.md section 5):
# exclusive create of seq/<n>, the same scheme as every SkillPilot master.
proc ::skillpilot::alloc_seq {dir} {
    set n [ReserveSeq $dir]
    WriteHint $dir $n
    return $n
}

# ReserveSeq is alloc_seq without updating seq/hint; submit calls WriteHint
# after writing the command (as the Go master writes the hint in the
# background), so the runner sees the command one atomic write sooner.
proc ::skillpilot::ReserveSeq {dir} {
    variable seqWidth
    set n [ReadHint $dir]
    if {$n < 0} { set n [MaxReserved $dir] }
    set tries 0
    while 1 {
        incr n
        if {[fs::create_exclusive $dir seq [format %0*lld $seqWidth $n]]} { break }
        if {[incr tries] % 64 == 0} {
            set m [MaxReserved $dir]
            if {$m > $n} { set n $m }
        }
    }
    return $n
}

# WriteHint raises seq/hint to n (best effort: a lost or late hint costs the
# next allocator a few EEXIST, never a wrong seq).
proc ::skillpilot::WriteHint {dir n} {
    if {[ReadHint $dir] < $n} {
        catch {fs::write_atomic $dir seq hint "$n\n"}
    }
}

# write_atomic replaces the file at path (the caller's path: its directory
# is not checked for symlinks) with data: see fs::write_atomic. Session
# code calls fs::write_atomic with the session root.
proc ::skillpilot::write_atomic {path data} {
    fs::write_atomic [file dirname $path] "" [file tail $path] $data
}

# lock_held probes the flock on path: see fs::lock_held.
proc ::skillpilot::lock_held {path} {
    return [fs::lock_held [file dirname $path] "" [file tail $path]]
}

# fs_type returns {type network} of the filesystem under dir: see fs::fs_type.
proc ::skillpilot::fs_type {dir} {
    return [fs::fs_type $dir]
}

# read_file, read_range, create_exclusive and revalidate on the caller's
# path (the older API): see their fs:: forms.
proc ::skillpilot::read_file {path {foundVar ""} {limit ""}} {
    if {$foundVar ne ""} { upvar 1 $foundVar found }
    return [fs::read_file [file dirname $path] "" [file tail $path] found $limit]
}

proc ::skillpilot::read_range {path offset {length -1}} {
    return [fs::read_range [file dirname $path] "" [file tail $path] $offset $length]
}

proc ::skillpilot::create_exclusive {path} {
    return [fs::create_exclusive [file dirname $path] "" [file tail $path]]
}

proc ::skillpilot::revalidate {dir} {
    fs::revalidate $dir
}
