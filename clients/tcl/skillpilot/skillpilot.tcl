# SkillPilot master for Tcl 8.6 (no packages), usable inside any Tcl-based
# EDA tool:
#
#   package require skillpilot
#   set r [skillpilot::run /path/to/session {puts hello; expr 6*7}]
#   puts "[dict get $r status] [dict get $r value]"
#   puts -nonewline [skillpilot::output /path/to/session $r]
#
#   # answer a prompt of a running command
#   set id [lindex [skillpilot::parse_name [skillpilot::submit $dir {write_design top.v}]] 1]
#   skillpilot::send $dir $id "y\n" -expect {Overwrite\? \(y/n\) }
#
# It follows PROTOCOL.md: seq allocation by exclusive create in seq/, atomic
# writes (temp file + rename, mode 0600), results in result/, control
# requests in the ctl/ mailbox, liveness by the heartbeat counter on this
# host's clock (and, on a local filesystem, the runner's flock).
#
# Errors are raised with -errorcode {SKILLPILOT CODE ...}; CODE and the
# exit code of the master CLI that goes with it (skillpilot::exitcode):
#   COMMAND_FAILED 1  USAGE 2  WAIT_TIMEOUT 3  EXPECT_TIMEOUT 3  COMMAND_TIMEOUT 3
#   CANCELLED 4  SESSION_MISSING 5  RUNNER_NOT_ALIVE 5  CANNOT_SERVE 5  STALE 5
#   UNKNOWN_CMD_ID 6  NOT_RUNNING 7  NOT_QUEUED 7  ALREADY_FINISHED 7  ALREADY_WITHDRAWN 7  IDLE 7
#   PRUNED 8 (the command ran; the session's retention removed its result since)
#   REJECTED 10
#   REFUSED_ECHO 10  IO_ERROR 10
# Errors for a result that is not ok carry the result dict as a third
# element: {SKILLPILOT COMMAND_FAILED <result>}.

namespace eval ::skillpilot {
    variable version 1
    # The version of SkillPilot (internal/version/VERSION, the one every
    # binary and the Python package print; scripts/sync-version.sh).
    variable release 1.0.0
    # Polling starts at 1 ms and doubles up to pollMs while nothing changes.
    variable pollMs 100
    # For its first spinUs microseconds a wait looks again at once (after
    # sleeps whole milliseconds); then 1 ms, doubling up to pollMs.
    variable spinUs 1500
    variable adaptive 1
    # Per session directory: how long the last short waits took (µs).
    variable waitSeen
    array set waitSeen {}
    # Every request and wait fails with RUNNER_NOT_ALIVE once no live runner
    # has been seen for this long (ms; 0: 10 s or ten heartbeat intervals,
    # whichever is longer; never under one liveness window: Grace);
    # -waitforrunner overrides it per call.
    variable waitForRunnerMs 0
    variable leaseCounter 0
    # Per session directory: the last heartbeat counter seen and when.
    variable hbSeen
    array set hbSeen {}
    variable fsCache
    array set fsCache {}
    # Per session directory: {session_id kind} of the runner last seen.
    variable kindSeen
    array set kindSeen {}
    # Leases kept by keeplease: dir -> {ttl_ms lease_id next_ms}.
    variable leases
    array set leases {}
}

proc ::skillpilot::exitcode {errorcode} {
    if {[lindex $errorcode 0] ne "SKILLPILOT"} { return 10 }
    set map {COMMAND_FAILED 1 USAGE 2 WAIT_TIMEOUT 3 EXPECT_TIMEOUT 3 COMMAND_TIMEOUT 3 CANCELLED 4 SESSION_MISSING 5
             RUNNER_NOT_ALIVE 5 CANNOT_SERVE 5 STALE 5 UNKNOWN_CMD_ID 6 NOT_RUNNING 7 NOT_QUEUED 7 ALREADY_FINISHED 7
             ALREADY_WITHDRAWN 7 IDLE 7 PRUNED 8}
    set code [lindex $errorcode 1]
    return [expr {[dict exists $map $code] ? [dict get $map $code] : 10}]
}

# Opts merges "-name value" arguments into defaults; an unknown name is a
# USAGE error.
proc ::skillpilot::Opts {defaults arglist} {
    if {[llength $arglist] % 2} {
        Throw USAGE "options must come in pairs: $arglist"
    }
    foreach {k v} $arglist {
        if {![dict exists $defaults $k]} {
            Throw USAGE "unknown option $k: expected one of [join [dict keys $defaults] {, }]"
        }
        dict set defaults $k $v
    }
    return $defaults
}

proc ::skillpilot::check {dir} {
    variable fsCache
    if {![info exists fsCache($dir)] || $fsCache($dir)} { ;# Not known to be local: NFS drops stale lookups.
        fs::revalidate $dir
        fs::revalidate [file dirname $dir]
    }
    if {![fs::is_dir $dir queue]} {
        ThrowCtx SESSION_MISSING "not a session directory (no queue/): $dir" [dict create dir $dir]
    }
    if {![fs::is_dir $dir seq]} {
        catch {fs::mkdir $dir seq}
    }
    return [file normalize $dir]
}

proc ::skillpilot::Network {dir} {
    variable fsCache
    if {![info exists fsCache($dir)]} { set fsCache($dir) [lindex [fs::fs_type $dir] 1] }
    return $fsCache($dir)
}

proc ::skillpilot::Owner {} {
    return "tcl-master@[info hostname]:[pid]"
}

# --- commands ---------------------------------------------------------------

# submitOptions are the options of every door that queues a command, with
# their defaults: submit, run and pool_submit take them all from this one
# table (PROTOCOL.md 15.5, 4.13: a pool door has every option a session
# door has). CommandFields checks them.
namespace eval ::skillpilot {
    variable submitOptions {-kind "" -timeout 0 -cancel_policy "" -cmd_id "" -trace_id "" -labels {} -max_output_bytes 0}
}

# submit queues payload and returns the command's file name. Options:
# -kind (default: the runner's, else tcl), -timeout (seconds; 0: the
# runner's default), -cancel_policy, -cmd_id (default: a new UUIDv7),
# -max_output_bytes (the command's output budget; 0: the runner's
# --max-output-bytes, PROTOCOL.md section 6.3), -trace_id, -labels (a
# dict), -reply 1: return the submit reply of every master instead
# (PROTOCOL.md section 19, "Cursors"), a dict: cmd_id, seq, name, file
# ("queue/NAME") and resume_cursor (the spool size just before the command
# was queued: its output comes after it). A value the command file cannot
# hold (-timeout Inf, 0x10, .5 is written 0.5) is refused with USAGE
# before anything is written (json::number).
proc ::skillpilot::submit {dir payload args} {
    variable submitOptions
    set dir [check $dir]
    set o [Opts [dict merge $submitOptions {-reply 0}] $args]
    lassign [CommandFields $dir $o] id fields
    set seq [ReserveSeq $dir]
    set cursor [fs::size $dir log session.out] ;# Before the command is queued.
    set name [CommandName $seq $id]
    try {
        fs::write_atomic $dir queue $name [CommandJSON $id $seq $payload $fields [Owner]]
    } finally {
        WriteHint $dir $seq ;# After the command: the runner sees it one write sooner.
    }
    if {[dict get $o -reply]} {
        return [dict create cmd_id $id seq $seq name $name file queue/$name resume_cursor $cursor]
    }
    return $name
}

# CommandFields checks the submitOptions in o for a command to be queued in
# the session dir (the kind defaults to its runner's) and returns {cmd_id
# fields}: fields are the JSON members after the payload (kind, timeout_s,
# cancel_policy, max_output_bytes, trace_id, labels). USAGE names the
# option and the value at fault; nothing has been written then.
proc ::skillpilot::CommandFields {dir o} {
    set id [dict get $o -cmd_id]
    if {$id eq ""} {
        set id [new_id]
    } elseif {![valid_id $id]} {
        Throw USAGE "invalid cmd_id \"$id\": 1-128 characters of \[A-Za-z0-9._-\]"
    }
    set kind [dict get $o -kind]
    if {$kind eq ""} { set kind [RunnerKind $dir] }
    if {![regexp {^[a-z][a-z0-9_-]{0,31}$} $kind]} { Throw USAGE "kind must be tcl, sh or a driver's kind (1-32 characters of \[a-z0-9_-\]), not \"$kind\"" }
    set timeout [json::number -timeout [dict get $o -timeout] real 0]
    set policy [dict get $o -cancel_policy]
    if {$policy ni {"" ctrl_c terminate_tool terminate_session}} { Throw USAGE "unknown -cancel_policy $policy" }
    set budget [json::number -max_output_bytes [dict get $o -max_output_bytes] integer 0]
    set fields ",\"kind\":[json::string $kind]"
    if {$timeout != 0} { append fields ",\"timeout_s\":$timeout" }
    if {$policy ne ""} { append fields ",\"cancel_policy\":[json::string $policy]" }
    if {$budget != 0} { append fields ",\"max_output_bytes\":$budget" }
    append fields [Correlation [dict get $o -trace_id] [dict get $o -labels]]
    return [list $id $fields]
}

# CommandJSON is the text of a command file: fields from CommandFields, then
# extra JSON members (a pool's affinity), submitted_at and submitter.
proc ::skillpilot::CommandJSON {id seq payload fields submitter {extra ""}} {
    variable version
    return "\{\"protocol_version\":$version,\"cmd_id\":[json::string $id],\"seq\":$seq,\"payload\":[json::string $payload]$fields$extra,\"submitted_at\":[json::string [now_iso]],\"submitter\":[json::string $submitter]\}"
}

# CommandName is cmd_<seq>_<cmd_id>.json.
proc ::skillpilot::CommandName {seq id} {
    variable seqWidth
    return [format "cmd_%0*lld_%s.json" $seqWidth $seq $id]
}

# Correlation checks -trace_id and -labels (a dict) by PROTOCOL.md section 4
# and returns them as JSON members to append ("" for none).
proc ::skillpilot::Correlation {traceID labels} {
    set out ""
    if {$traceID ne ""} {
        if {![regexp {^[!-~]{1,128}$} $traceID]} {
            Throw USAGE "-trace_id \"$traceID\": 1-128 printable ASCII characters without spaces"
        }
        append out ",\"trace_id\":[json::string $traceID]"
    }
    if {[catch {dict size $labels} n] || $n > 16} { Throw USAGE "-labels: a dict of at most 16 entries" }
    if {$n == 0} { return $out }
    set members {}
    dict for {k v} $labels {
        if {![regexp {^[a-z_][a-z0-9_]{0,62}$} $k]} {
            Throw USAGE "-labels: key \"$k\" must be 1-63 characters of \[a-z0-9_\], not starting with a digit"
        }
        if {[string length [encoding convertto utf-8 $v]] > 256} { Throw USAGE "-labels: $k is longer than 256 bytes" }
        if {[regexp {[\x00-\x1f\x7f-\x9f]} $v]} { Throw USAGE "-labels: $k must not contain control characters" }
        lappend members "[json::string $k]:[json::string $v]"
    }
    append out ",\"labels\":\{[join $members ,]\}"
    return $out
}

# spool_size returns the size of the session's spool (log/session.out), 0
# when there is none: a resume_cursor from which waitfor sees only output
# printed from now on.
proc ::skillpilot::spool_size {dir} {
    return [fs::size [check $dir] log session.out]
}

# RunnerKind is the kind of the session's runner (state.json), else tcl.
# It is remembered with the runner's session_id: a runner never changes its
# kind, so only a new runner's state.json is parsed whole.
proc ::skillpilot::RunnerKind {dir} {
    variable kindSeen
    if {[catch {fs::read_file $dir state state.json found 1048576} text] || !$found} { return tcl }
    set sid ""
    regexp {"session_id": *"([A-Za-z0-9._-]+)"} $text -> sid
    if {$sid ne "" && [info exists kindSeen($dir)] && [lindex $kindSeen($dir) 0] eq $sid} {
        return [lindex $kindSeen($dir) 1]
    }
    if {[catch {json::parse $text} st]} { return tcl }
    set kind [expr {[dict exists $st kind] && [regexp {^[a-z][a-z0-9_-]{0,31}$} [dict get $st kind]] ? [dict get $st kind] : "tcl"}]
    if {[dict exists $st session_id] && [dict get $st session_id] eq $sid && $sid ne ""} {
        set kindSeen($dir) [list $sid $kind]
    }
    return $kind
}

# find returns the file name of the command whose cmd_id is exactly cmd,
# the lowest seq of queue/, inflight/ and result/ (FindIn; a file name is
# returned as is).
proc ::skillpilot::find {dir cmd} {
    lassign [parse_ref $cmd] name cmd
    if {$name ne ""} { return $name }
    set n [FindIn $dir $cmd {queue inflight result}]
    if {$n ne ""} { return $n }
    ThrowPruned $dir "" $cmd
    set w [FindIn $dir $cmd withdrawn]
    if {$w ne ""} {
        ThrowCtx UNKNOWN_CMD_ID "$cmd was withdrawn (withdrawn/$w): it never runs and gets no result" [dict create cmd_id $cmd]
    }
    ThrowCtx UNKNOWN_CMD_ID "no command $cmd in this session" [dict create cmd_id $cmd]
}

# PrunedBelow raises PRUNED when result name, found by a lookup of cmd_id
# id, is the duplicate_cmd_id refusal of a retry whose original (a lower
# seq) the retention removed: the cmd_id names the original.
proc ::skillpilot::PrunedBelow {dir name id} {
    if {[catch {fs::read_file $dir result $name ok 16777216} text] || !$ok} { return }
    if {[string first duplicate_cmd_id $text] < 0 || [catch {json::parse $text} r]} { return }
    if {![dict exists $r error code] || [dict get $r error code] ne "duplicate_cmd_id"} { return }
    if {![dict exists $r error context pruned] || [dict get $r error context pruned] ne "true"} { return }
    set e [FindPruned $dir "" $id]
    if {$e eq "" || [lindex [parse_name [lindex $e 0]] 0] >= [lindex [parse_name $name] 0]} { return }
    ThrowPruned $dir "" $id
}

# FindPruned looks for a command in the session's pruned index
# (log/pruned.log, then log/pruned.log.1, PROTOCOL.md section 23: the
# runner's rotation renames the first to the second, so a line is in the
# file read first or, moved between the two reads, in the second): by its
# file's name when name is set, else by cmd_id (the lowest seq). It returns
# {name status end_ts}, or "" when the index holds none.
proc ::skillpilot::FindPruned {dir name id} {
    set found ""
    set foundSeq ""
    foreach f {pruned.log pruned.log.1} {
        if {[catch {fs::read_file $dir log $f ok 536870912} data]} { continue }
        set lines [split $data \n]
        foreach line [lrange $lines 0 end-1] { ;# The last piece is "" or a torn line.
            if {[llength [set fields [split $line " "]]] != 3} { continue }
            lassign $fields n st ts
            set p [parse_name $n]
            if {$p eq ""} { continue }
            lassign $p seq nid
            if {($name ne "" && $n ne $name) || ($name eq "" && $nid ne $id)} { continue }
            if {$found eq "" || $name ne "" || $seq < $foundSeq} {
                set found [list $n $st $ts]
                set foundSeq $seq
            }
        }
    }
    return $found
}

# ThrowPruned raises PRUNED (exit 8; -context cmd_id, status) when the
# pruned index holds the command; otherwise it returns.
proc ::skillpilot::ThrowPruned {dir name id} {
    set e [FindPruned $dir $name $id]
    if {$e eq ""} { return }
    lassign $e n st ts
    set id [lindex [parse_name $n] 1]
    set ended [expr {$ts eq "-" ? "" : " at $ts"}]
    return -code error -level 2 -errorcode [list SKILLPILOT PRUNED] -context [dict create cmd_id $id status $st] \
        "pruned: command $id ended $st$ended, and the session's retention has removed its result and output since (log/pruned.log): they cannot be read any more"
}

# Gone raises PRUNED when command file name is neither queued nor running
# nor has a result and the pruned index holds it (looked at in the order a
# command moves, then the result once more), UNKNOWN_CMD_ID when a
# withdraw took it back (withdrawn/: it never runs, PROTOCOL.md section
# 19); otherwise it returns (the Go master's Command.gone).
proc ::skillpilot::Gone {dir name} {
    foreach d {queue inflight result} {
        if {[ExistsIn $dir $d $name]} { return }
    }
    set e [FindPruned $dir $name ""]
    if {$e ne "" && ![ExistsIn $dir result $name]} { ThrowPruned $dir $name "" }
    if {[ExistsIn $dir withdrawn $name] && ![ExistsIn $dir result $name]} {
        set id [lindex [parse_name $name] 1]
        ThrowCtx UNKNOWN_CMD_ID "$id was withdrawn (withdrawn/$name): it never runs and gets no result" [dict create cmd_id $id]
    }
}

# result returns the command's result as a dict (every field of the result
# file, plus name, error_code and error_message), or "" while it has none.
proc ::skillpilot::result {dir cmd} {
    set name [find $dir $cmd]
    if {[Network $dir]} { fs::revalidate $dir result } ;# Local lookups are never stale.
    set r [read_json $dir result $name]
    if {$r eq ""} { return "" }
    return [ResultDict $r $name]
}

# ResultDict is result's dict of a parsed result file r named name: every
# field, plus name, error_code and error_message ("" for a field it lacks).
proc ::skillpilot::ResultDict {r name} {
    dict set r name $name
    foreach k {cmd_id status exit_reason tool_rc value value_truncated output_path exit_code signal} {
        if {![dict exists $r $k]} { dict set r $k "" }
    }
    set err [expr {[dict exists $r error] ? [dict get $r error] : {}}]
    dict set r error_code [expr {[dict exists $err code] ? [dict get $err code] : ""}]
    dict set r error_message [expr {[dict exists $err message] ? [dict get $err message] : ""}]
    return $r
}

proc ::skillpilot::ResultError {r} {
    set st [dict get $r status]
    set code [expr {$st eq "timeout" ? "COMMAND_TIMEOUT" : $st eq "cancelled" ? "CANCELLED" : "COMMAND_FAILED"}]
    set why [dict get $r error_message]
    if {$why eq ""} { set why [dict get $r exit_reason] }
    # The result's error context as the runner wrote it (PROTOCOL.md
    # section 7), then cmd_id, status and exit_reason, which win.
    set ctx [dict create]
    set err [expr {[dict exists $r error] ? [dict get $r error] : {}}]
    if {[dict exists $err context]} { set ctx [dict get $err context] }
    dict set ctx cmd_id [dict get $r cmd_id]
    dict set ctx status $st
    if {[dict get $r exit_reason] ne ""} { dict set ctx exit_reason [dict get $r exit_reason] }
    return -code error -level 2 -errorcode [list SKILLPILOT $code $r] -context $ctx "command [dict get $r cmd_id]: $st: $why"
}

# wait returns the command's result dict. Options: -timeout ms (< 0: no
# limit; WAIT_TIMEOUT), -check 1 (a status other than ok raises
# COMMAND_FAILED, COMMAND_TIMEOUT or CANCELLED), -waitforrunner ms (the dead
# grace; RUNNER_NOT_ALIVE, within about a second when the runner stopped on
# purpose). A wait that gives up for want of a runner leaves its command
# queued for a later runner, and its message says so ("<id> stays queued:
# ..."; -context has the cmd_id); withdraw takes it back. The pre-1.0 form
# "wait dir cmd ?timeout_ms? ?check?" still works.
proc ::skillpilot::wait {dir cmd args} {
    variable waitForRunnerMs
    if {[llength $args] && ![string match -* [lindex $args 0]]} {
        set args [list -timeout [lindex $args 0] -check [expr {[llength $args] > 1 ? [lindex $args 1] : 1}]]
    }
    set o [Opts [list -timeout -1 -check 1 -waitforrunner $waitForRunnerMs] $args]
    set dir [check $dir]
    set name [find $dir $cmd]
    set w [WaitStart $dir [dict get $o -timeout] [dict get $o -waitforrunner] 1]
    # Whether retention removed its result: after a second, then every second.
    set prunedAt [expr {[::tcl::clock::milliseconds] + 1000}]
    while 1 {
        set r [result $dir $name]
        if {$r ne ""} {
            WaitDone w
            if {[dict get $o -check] && [dict get $r status] ne "ok"} { ResultError $r }
            return $r
        }
        if {[::tcl::clock::milliseconds] >= $prunedAt} {
            set prunedAt [expr {[::tcl::clock::milliseconds] + 1000}]
            Gone $dir $name
        }
        if {[catch {WaitStep w "no result for $name"} msg opts]} {
            set id [lindex [parse_name $name] 1]
            set ctx [expr {[dict exists $opts -context] ? [dict get $opts -context] : {}}]
            dict set opts -context [dict merge [dict create cmd_id $id] $ctx]
            if {[lindex [dict get $opts -errorcode] 1] eq "RUNNER_NOT_ALIVE"} {
                # Say plainly what becomes of the command (the Go master's
                # noRunnerErr).
                set msg "waiting for $id: $msg"
                if {[Queued $dir $name]} {
                    append msg "; $id stays queued: a runner started later runs it unless it is withdrawn"
                }
            }
            return -options $opts $msg
        }
    }
}

# Queued reports whether command file name is still in queue/, unclaimed.
proc ::skillpilot::Queued {dir name} {
    fs::revalidate $dir queue
    return [fs::exists $dir queue $name]
}

# parse_ref parses a reference to a command, by one rule in every master
# (PROTOCOL.md section 19, "Naming a command"): a command file's name, or a
# path ending in one (queue/cmd_<seq>_<id>.json), is exactly that file:
# {name id}; a cmd_id is {"" id}. Anything else is a USAGE error.
proc ::skillpilot::parse_ref {ref} {
    set base [lindex [split $ref /] end]
    set p [parse_name $base]
    if {$p ne ""} { return [list $base [lindex $p 1]] }
    if {$base ne $ref} { Throw USAGE "\"$ref\" is not a command file's name (cmd_<seq>_<cmd_id>.json)" }
    if {![valid_id $ref]} { Throw USAGE "invalid cmd_id \"$ref\"" }
    return [list "" $ref]
}

# FindIn returns the command file of id with the lowest seq in dirs, or
# "". Each is listed once, in the order a command moves through them, so
# one that moves meanwhile is still found; all of them, not only up to the
# first that has one: a retry under an answered cmd_id, queued behind a
# backlog, must not hide the command that ran (PROTOCOL.md section 19,
# "Naming a command").
proc ::skillpilot::FindIn {dir id dirs} {
    set best ""
    foreach d $dirs {
        fs::revalidate $dir $d
        if {[catch {fs::names $dir $d cmd_*.json} names]} { continue }
        foreach n $names {
            set p [parse_name $n]
            if {$p ne "" && [lindex $p 1] eq $id && ($best eq "" || [lindex $p 0] < [lindex $best 0])} {
                set best [list [lindex $p 0] $n $d]
            }
        }
    }
    if {$best eq ""} { return "" }
    if {[lindex $best 2] eq "result"} { PrunedBelow $dir [lindex $best 1] $id }
    return [lindex $best 1]
}

proc ::skillpilot::ExistsIn {dir sub name} {
    fs::revalidate $dir $sub
    return [fs::exists $dir $sub $name]
}

# withdraw takes back a command no runner has claimed yet (the Go master's
# Session.Withdraw, Python's Session.withdraw): its file is renamed from
# queue/ into withdrawn/ (PROTOCOL.md section 19), so it never runs and gets
# no result. It is atomic against a runner's claim and a pool mover's,
# which rename the same entry: exactly one succeeds (fs::take_back). cmd is
# a cmd_id (the first file with it), a command file's name or a path ending
# in one (exactly that file). A command a pool moved is followed through
# forward/ records and taken back where it is now, also while the move is
# under way. Needs no runner. A command that is running (claimed) raises
# NOT_QUEUED, one that has its result ALREADY_FINISHED, one withdrawn
# before ALREADY_WITHDRAWN (all exit 7), one that is nowhere UNKNOWN_CMD_ID
# (6): it never runs. -context has the cmd_id. Returns the CLI's withdraw
# --json reply as a dict: protocol_version, cmd_id, withdrawn 1, name (the
# file taken back; session too when a pool moved it to another session).
proc ::skillpilot::withdraw {dir cmd} {
    set dir [check $dir]
    lassign [parse_ref $cmd] name id
    set ctx [dict create cmd_id $id]
    set lookup {queue moved forward inflight result}
    if {$name eq ""} {
        set name [FindIn $dir $id $lookup]
        if {$name eq ""} {
            if {[FindIn $dir $id withdrawn] ne ""} {
                ThrowCtx ALREADY_WITHDRAWN "$id was withdrawn before: it never runs" $ctx
            }
            ThrowPruned $dir "" $id
            ThrowCtx UNKNOWN_CMD_ID "no command $id is queued, running or finished in this session (it will not run)" $ctx
        }
    } else {
        set found 0
        foreach d $lookup {
            if {[ExistsIn $dir $d $name]} { set found 1; break }
        }
        if {!$found && [ExistsIn $dir withdrawn $name]} {
            ThrowCtx ALREADY_WITHDRAWN "$id was withdrawn before (withdrawn/$name): it never runs" $ctx
        }
        if {!$found} {
            ThrowPruned $dir $name $id
            ThrowCtx UNKNOWN_CMD_ID "no command file $name is queued, running or finished in this session (it will not run)" $ctx
        }
    }
    set sdir $dir
    set cur $name
    set hops 0
    set deadline [expr {[::tcl::clock::milliseconds] + 5000}]
    while 1 {
        if {[fs::take_back $sdir queue $cur $cur]} { return [WithdrawnReply $dir $sdir $id $cur] }
        # Gone from queue/: a runner, a mover or a withdraw took it. A mover
        # renames it into moved/, records forward/, then removes moved/:
        # look in that order.
        set moving [ExistsIn $sdir moved $cur]
        set fwd [read_json $sdir forward $cur]
        if {$fwd ne ""} {
            foreach k {to_name stage to_session} { set $k [expr {[dict exists $fwd $k] ? [dict get $fwd $k] : ""}] }
            set p [parse_name $to_name]
            if {$p eq "" || [lindex $p 1] ne $id || $stage eq "" || [string first / $stage] >= 0 || $to_session eq ""
                || $hops >= 16} {
                ThrowCtx IO_ERROR "withdrawing $id: cannot follow forward/$cur" $ctx
            }
            set next [fs::relative $sdir $to_session]
            # The mover may not have published it yet: its staged copy is
            # taken first, then the published file.
            if {[fs::take_back $next queue $stage $to_name]} { return [WithdrawnReply $dir $next $id $to_name] }
            set sdir $next
            set cur $to_name
            incr hops
            continue
        }
        if {$moving} {
            if {[::tcl::clock::milliseconds] < $deadline} {
                after 10 ;# A mover is staging it: wait for its forward record.
                continue
            }
            ThrowCtx NOT_QUEUED "$id is being moved by a pool (moved/$cur) and may still run; withdraw it again once master pool heal has finished the move" $ctx
        }
        # inflight/ before result/: the runner renames the result in, then
        # moves the claim out, so a claim seen beside a result is finished,
        # and no order of the two looks misses both.
        set claimed [ExistsIn $sdir inflight $cur]
        fs::revalidate $sdir result
        if {![catch {read_json $sdir result $cur} r] && $r ne ""} {
            set st [expr {[dict exists $r status] ? [dict get $r status] : ""}]
            ThrowCtx ALREADY_FINISHED "$id has its result ($st); nothing to withdraw" $ctx
        }
        if {$claimed} {
            ThrowCtx NOT_QUEUED "$id is running (a runner claimed it); cancel it instead" $ctx
        }
        if {[ExistsIn $sdir withdrawn $cur]} {
            ThrowCtx ALREADY_WITHDRAWN "$id was withdrawn before (withdrawn/$cur): it never runs" $ctx
        }
        ThrowCtx UNKNOWN_CMD_ID "$id is no longer queued, running or finished in this session (it will not run)" $ctx
    }
}

proc ::skillpilot::WithdrawnReply {home dir id name} {
    variable version
    set r [dict create protocol_version $version cmd_id $id withdrawn 1 name $name]
    if {[file normalize $dir] ne [file normalize $home]} { dict set r session $dir }
    return $r
}

# run submits payload and waits for its result, as wait does (and as the Go
# master's Run and the Python master's run do): a status other than ok
# raises COMMAND_FAILED, COMMAND_TIMEOUT or CANCELLED whose -errorcode
# carries the result dict, {SKILLPILOT COMMAND_FAILED <result>}. Options:
# those of submit, -waittimeout ms, -waitforrunner ms and -check (default 1;
# -check 0 returns the result whatever its status).
proc ::skillpilot::run {dir payload args} {
    variable waitForRunnerMs
    variable submitOptions
    set o [Opts [dict merge $submitOptions [list -waittimeout -1 -check 1 -waitforrunner $waitForRunnerMs]] $args]
    set name [submit $dir $payload {*}[dict remove $o -waittimeout -check -waitforrunner]]
    return [wait $dir $name -timeout [dict get $o -waittimeout] -check [dict get $o -check] \
                -waitforrunner [dict get $o -waitforrunner]]
}

# output returns the command's output (a result dict or a cmd_id) decoded
# from UTF-8; offset and length are byte positions (length 0 or less: to
# the end, as in every master; a negative offset is a USAGE error).
proc ::skillpilot::output {dir r {offset 0} {length -1}} {
    set dir [check $dir]
    if {![string is entier -strict $offset] || $offset < 0} {
        ThrowCtx USAGE "output offset $offset: must not be negative" [dict create field offset]
    }
    if {![string is entier -strict $length]} {
        ThrowCtx USAGE "output length $length: not an integer" [dict create field length]
    }
    if {$length <= 0} { set length -1 } ;# To the end, as every master.
    if {[llength $r] > 1 && [dict exists $r output_path]} {
        set res $r
        set rel [dict get $r output_path]
        # A command that never ran (cancelled before start, runner restarted) has none.
        if {$rel eq ""} { return "" }
    } else {
        # The result before the file: one committed while the file is read
        # would make a read of a running command look short.
        set res [result $dir $r]
        set rel output/[string range [find $dir $r] 0 end-5].out
    }
    if {![string match output/* $rel] || ".." in [file split $rel]} {
        Throw IO_ERROR "result has no usable output_path: $rel"
    }
    set parts [split $rel /]
    set sub [join [lrange $parts 0 end-1] /]
    if {[Network $dir]} { fs::revalidate $dir $sub }
    set data [fs::read_range $dir $sub [lindex $parts end] $offset $length found]
    if {!$found && !([llength $r] > 1 && [dict exists $r output_path])} {
        Gone $dir [find $dir $r] ;# Its files left with the session's retention.
    }
    if {$res ne ""} {
        set data [JudgeOutput [fs::path $dir $sub [lindex $parts end]] $res $data $found $offset $length]
    }
    return [encoding convertfrom utf-8 $data]
}

# JudgeOutput is what output answers for a read (data; found 0: no file)
# of a command whose result is res: never fewer bytes than the result says
# the file holds (stats.bytes). A missing file is served from the result's
# output_inline copy where it is whole; else, as a short file, IO_ERROR.
proc ::skillpilot::JudgeOutput {shown res data found offset length} {
    set total 0
    if {[dict exists $res stats bytes]} { set total [dict get $res stats bytes] }
    set want [expr {$length < 0 ? $total : min($total, $offset + $length)}]
    set cmd [dict get $res cmd_id]
    if {!$found} {
        if {[dict exists $res output_inline] &&
            ![catch {binary decode base64 -strict [dict get $res output_inline]} copy] &&
            [string length $copy] == $total && $total > 0} {
            set end [expr {$length < 0 ? "end" : $offset + $length - 1}]
            return [string range $copy $offset $end]
        }
        if {$want > $offset} {
            Throw IO_ERROR "$shown is gone (deleted or moved out of the session), and the result of $cmd says it held $total bytes: its output is not in this session any more"
        }
        return ""
    }
    set got [expr {$offset + [string length $data]}]
    if {$got < $want} {
        Throw IO_ERROR "$shown holds $got bytes, but the result of $cmd says $total: the rest is not in this session"
    }
    return $data
}
