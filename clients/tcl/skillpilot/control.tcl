# Control requests of the SkillPilot Tcl master: the ctl/ mailbox (one file
# per request, answered in ctl/ack/), stop, status, waitfor and ready.

# request sends one control request through the mailbox and returns the
# runner's reply as a dict, without interpreting its outcome (cancel and
# stop do). As the Go master: with no live runner it writes nothing and
# raises RUNNER_NOT_ALIVE (a request for no runner would only be stale for
# the next one); otherwise it writes ctl/req_<seq>_<req_id>.json (temp file
# + rename) naming the live runner's session_id, with op and the JSON
# members in members (text such as "\"cmd_id\":\"x\""), and waits for
# ctl/ack/<same name>, checking liveness meanwhile. A wait that fails
# withdraws the request unless the runner took it. Options: -timeout ms,
# -waitforrunner ms.
proc ::skillpilot::request {dir op members args} {
    variable version
    variable seqWidth
    variable waitForRunnerMs
    set o [Opts [list -timeout -1 -waitforrunner $waitForRunnerMs] $args]
    set dir [check $dir]
    set id [new_id]
    set seq [alloc_seq $dir]
    # Alive at once when the heartbeat is fresh by the filesystem's clock;
    # else watch the counter (PROTOCOL.md section 19, "Control requests"):
    # a counter takes up to a heartbeat period to move.
    set st [FreshHeartbeat $dir $seq]
    if {$st eq ""} { set st [dict get [AwaitAlive $dir [dict get $o -waitforrunner]] state] }
    set json "\{\"protocol_version\":$version,\"req_id\":[json::string $id],\"seq\":$seq,\"op\":[json::string $op]"
    if {[dict exists $st session_id] && [dict get $st session_id] ne ""} {
        append json ",\"session_id\":[json::string [dict get $st session_id]]"
    }
    append json ",\"ts\":[json::string [now_iso]],\"submitter\":[json::string [Owner]]"
    if {$members ne ""} { append json ",$members" }
    append json "\}"
    set name [format "req_%0*lld_%s.json" $seqWidth $seq $id]
    fs::write_atomic $dir ctl $name $json
    set w [WaitStart $dir [dict get $o -timeout] [dict get $o -waitforrunner]]
    while 1 {
        fs::revalidate $dir ctl/ack
        set reply [read_json $dir ctl/ack $name]
        if {$reply ne ""} { return $reply }
        if {[catch {WaitStep w "no reply to $name"} msg opts]} {
            # Withdraw the request unless the runner took it meanwhile.
            fs::withdraw $dir ctl $name
            fs::revalidate $dir ctl/ack
            set reply [read_json $dir ctl/ack $name]
            if {$reply ne ""} { return $reply }
            return -options $opts $msg
        }
    }
}

# FreshHeartbeat returns state.json when the runner looks alive from one
# look, without waiting (the Go master's freshHeartbeat): state.json names a
# session and is not stopped, the heartbeat is that session's, on a local
# filesystem the runner's lock is held, and heartbeat.json was rewritten
# within the liveness window by the session's filesystem clock: its mtime
# against that of seq reservation seq, just made, so no two hosts' clocks
# meet. Tcl's mtimes are whole seconds: the age is taken a second longer,
# the worst case. "" means "not shown", not "dead".
proc ::skillpilot::FreshHeartbeat {dir seq} {
    variable seqWidth
    fs::revalidate $dir state
    set st [read_json $dir state state.json 1]
    set hb [read_json $dir state heartbeat.json 1]
    foreach d [::list $st $hb] {
        if {$d eq "" || ![dict exists $d session_id] || [Phase $d] eq "stopped"} { return "" }
    }
    set sid [dict get $st session_id]
    if {$sid eq "" || [dict get $hb session_id] ne $sid} { return "" }
    set hbTime [fs::regular_mtime $dir state heartbeat.json]
    set ref [fs::regular_mtime $dir seq [format %0*lld $seqWidth $seq]]
    if {$hbTime eq "" || $ref eq "" || ($ref - $hbTime + 1) * 1000 > [Window $hb]} { return "" }
    if {![Network $dir] && [fs::lock_held $dir state runner.lock] != 1} { return "" }
    return $st
}

# OutcomeCode is the error code of a reply outcome that is not a success.
proc ::skillpilot::OutcomeCode {outcome} {
    set map {not_found UNKNOWN_CMD_ID already_finished ALREADY_FINISHED idle IDLE not_running NOT_RUNNING
             stale STALE expect_timeout EXPECT_TIMEOUT refused_echo REFUSED_ECHO}
    return [expr {[dict exists $map $outcome] ? [dict get $map $outcome] : "REJECTED"}]
}

# cancel cancels cmd_id (running or queued; a command file's name, or a
# path ending in one, names its command too), or with no cmd_id the running
# command, and returns the reply (outcome cancelled_running or
# cancelled_queued). Errors: UNKNOWN_CMD_ID (not_found), ALREADY_FINISHED,
# IDLE, STALE, REJECTED, RUNNER_NOT_ALIVE, WAIT_TIMEOUT. Options: -timeout
# ms, -waitforrunner ms.
proc ::skillpilot::cancel {dir {cmd_id ""} args} {
    if {$cmd_id eq ""} {
        set members {"scope":"current"}
    } else {
        # A command file's name names its command too (PROTOCOL.md 19).
        set cmd_id [lindex [parse_ref $cmd_id] 1]
        set members "\"scope\":\"cmd_id\",\"cmd_id\":[json::string $cmd_id]"
    }
    set reply [request $dir cancel $members {*}$args]
    set outcome [expr {[dict exists $reply outcome] ? [dict get $reply outcome] : ""}]
    if {$outcome in {cancelled_running cancelled_queued}} { return $reply }
    set what "cancel [expr {$cmd_id eq "" ? "(current)" : $cmd_id}]"
    return -code error -errorcode [list SKILLPILOT [OutcomeCode $outcome] $reply] -context [ReplyContext $reply] \
        "$what: $outcome: [expr {[dict exists $reply message] ? [dict get $reply message] : ""}]"
}

# send types data (a Tcl string, sent as UTF-8; add the "\n" a line needs)
# into the tool's terminal while command cmd_id runs, and returns the
# runner's reply (outcome delivered: bytes, sha256 unless secret,
# spool_offset, output_offset, match_start/match_end). Options:
#   -expect re          wait for this RE2 regular expression (Go syntax) in
#                       the command's output first, from its expect cursor
#                       (the end of the last match a send consumed) or
#                       -expectfrom, within the last 64 KiB; a queued
#                       command is waited for; no match: EXPECT_TIMEOUT,
#                       nothing sent
#   -expecttimeout ms   how long the expect waits (the runner's clock;
#                       default 30000)
#   -expectfrom offset  output offset to search from
#   -secret 0|1         write the bytes nowhere in the session (refused with
#                       REFUSED_ECHO while the terminal echoes)
#   -timeout ms, -waitforrunner ms
# Errors: NOT_RUNNING (queued, finished or unknown: the reply, third element
# of the error code, has cmd_state), EXPECT_TIMEOUT, REFUSED_ECHO, STALE,
# REJECTED, RUNNER_NOT_ALIVE, WAIT_TIMEOUT, USAGE.
proc ::skillpilot::send {dir cmd_id data args} {
    variable waitForRunnerMs
    set o [Opts [list -expect "" -expecttimeout "" -expectfrom "" -secret 0 -timeout -1 \
                     -waitforrunner $waitForRunnerMs] $args]
    if {![valid_id $cmd_id]} { Throw USAGE "invalid cmd_id \"$cmd_id\"" }
    set bytes [encoding convertto utf-8 $data]
    if {[string length $bytes] > 1048576} { Throw USAGE "send: [string length $bytes] bytes, the limit is 1048576" }
    set m "\"cmd_id\":[json::string $cmd_id],\"data_b64\":\"[binary encode base64 $bytes]\""
    if {[dict get $o -secret]} { append m ",\"secret\":true" }
    if {[dict get $o -expect] ne ""} { append m ",\"expect\":[json::string [dict get $o -expect]]" }
    foreach {opt key max} {-expecttimeout expect_timeout_ms 604800000 -expectfrom expect_from ""} {
        set v [dict get $o $opt]
        if {$v eq ""} { continue }
        append m ",\"$key\":[json::number $opt $v integer 0 $max]"
    }
    set reply [request $dir send $m -timeout [dict get $o -timeout] -waitforrunner [dict get $o -waitforrunner]]
    return [Delivered $reply "send $cmd_id"]
}

# Delivered returns a reply whose outcome is delivered, or raises the error
# of its outcome.
proc ::skillpilot::Delivered {reply what} {
    set outcome [expr {[dict exists $reply outcome] ? [dict get $reply outcome] : ""}]
    if {$outcome eq "delivered"} { return $reply }
    return -code error -errorcode [list SKILLPILOT [OutcomeCode $outcome] $reply] -context [ReplyContext $reply] \
        "$what: $outcome: [expr {[dict exists $reply message] ? [dict get $reply message] : ""}]"
}

# signal sends sig (INT QUIT TSTP CONT HUP USR1 USR2 TERM KILL; SIGUSR1 and lower case
# work too) to the foreground process group of the tool's terminal while
# cmd_id runs, without cancel semantics, and returns the reply. Errors:
# NOT_RUNNING, STALE, REJECTED, RUNNER_NOT_ALIVE, WAIT_TIMEOUT, USAGE.
# Options: -timeout ms, -waitforrunner ms.
proc ::skillpilot::signal {dir cmd_id sig args} {
    if {![valid_id $cmd_id]} { Throw USAGE "invalid cmd_id \"$cmd_id\"" }
    set sig [string toupper [string trim $sig]]
    if {[string match SIG* $sig]} { set sig [string range $sig 3 end] }
    if {$sig ni {INT QUIT TSTP CONT HUP USR1 USR2 TERM KILL}} { Throw USAGE "unknown signal \"$sig\"" }
    set reply [request $dir signal "\"cmd_id\":[json::string $cmd_id],\"signal\":\"$sig\"" {*}$args]
    return [Delivered $reply "signal $cmd_id"]
}

# resize sets the tool's terminal to cols x rows (decimal integers, 1 to
# 10000: anything else is USAGE before a request is written); the tool
# gets SIGWINCH. Options: -timeout ms, -waitforrunner ms.
proc ::skillpilot::resize {dir cols rows args} {
    set m "\"cols\":[json::number cols $cols integer 1 10000],\"rows\":[json::number rows $rows integer 1 10000]"
    return [Delivered [request $dir resize $m {*}$args] "resize"]
}

# stop asks the runner to stop and returns the reply (outcome accepted).
# Options: -force 0|1, -wait 0|1, -timeout ms (bounds the whole call),
# -waitforrunner ms. With no live runner it raises RUNNER_NOT_ALIVE and
# writes nothing: a stop request never outlives the runner it was meant
# for. With -wait it returns once the runner has stopped (phase stopped,
# its lock free, or no live runner seen for the grace), so it cannot
# block on a runner that died. The pre-1.0 form "stop dir ?mode? ?wait?"
# still works.
proc ::skillpilot::stop {dir args} {
    variable waitForRunnerMs
    if {[llength $args] && ![string match -* [lindex $args 0]]} {
        set args [list -force [expr {[lindex $args 0] eq "force"}] -wait [expr {[llength $args] > 1 ? [lindex $args 1] : 0}]]
    }
    set o [Opts [list -force 0 -wait 0 -timeout -1 -waitforrunner $waitForRunnerMs] $args]
    set dir [check $dir]
    set w [WaitStart $dir [dict get $o -timeout] [dict get $o -waitforrunner]]
    set mode [expr {[dict get $o -force] ? "force" : "graceful"}]
    set reply [request $dir stop "\"mode\":\"$mode\"" -timeout [dict get $o -timeout] \
                   -waitforrunner [dict get $o -waitforrunner]]
    set outcome [expr {[dict exists $reply outcome] ? [dict get $reply outcome] : ""}]
    if {$outcome ne "accepted"} {
        return -code error -errorcode [list SKILLPILOT [OutcomeCode $outcome] $reply] -context [ReplyContext $reply] "stop: $outcome"
    }
    set lastAlive [::tcl::clock::milliseconds]
    while {[dict get $o -wait]} {
        set look [Observe $dir]
        if {![dict get $look alive] && [dict get $look definite]} { break }
        set now [::tcl::clock::milliseconds]
        if {[dict get $look alive]} {
            set lastAlive $now
        } elseif {$now - $lastAlive > [Grace [dict get $o -waitforrunner] [dict get $look interval]]} {
            break ;# Gone for the grace: stopped as far as any master can tell.
        }
        if {[dict get $w deadline] >= 0 && $now >= [dict get $w deadline]} {
            Throw WAIT_TIMEOUT "the runner did not stop within [dict get $o -timeout] ms"
        }
        RenewLeases
        after [expr {min(100, [dict get $w delay])}]
        dict set w delay [expr {[dict get $w delay] * 2}]
    }
    return $reply
}

# state returns state/state.json as a dict ("" fields when missing).
proc ::skillpilot::state {dir} {
    fs::revalidate $dir state
    set st [read_json $dir state state.json 1]
    foreach k {phase current_cmd_id reason session_id} {
        if {![dict exists $st $k]} { dict set st $k "" }
    }
    return $st
}

# status returns what the Go master's Status reports, with the same keys
# (resume_cursor: the spool size when it was read), liveness judged by the
# same rule (it may take up to two heartbeat periods plus 250 ms): the
# running command's elapsed time, output bytes, last line and quiet time,
# the lease, the last five results, retention (state.json's, as the runner
# wrote it). current_cmd_id and reason are always there ("" when none).
# Tcl's file times are whole seconds: heartbeat_age_ns and a ttl lease's
# remaining_ns are to the second.
proc ::skillpilot::status {dir} {
    variable version
    set dir [check $dir]
    set st [state $dir]
    set hb [read_json $dir state heartbeat.json 1]
    set out [dict create protocol_version $version alive 0 alive_reason "" dir $dir phase [dict get $st phase] \
                 reason [dict get $st reason] session_id [dict get $st session_id] \
                 current_cmd_id [dict get $st current_cmd_id] queue_depth 0 \
                 heartbeat_counter [expr {[dict exists $hb counter] ? [dict get $hb counter] : 0}]]
    foreach {k src} {runner_host hostname runner_pid runner_pid tool_pid tool_pid commands_done commands_done
                     filesystem filesystem tool_starts tool_starts error error kind kind retention retention} {
        if {[dict exists $st $src]} { dict set out $k [dict get $st $src] }
    }
    set n 0
    if {[catch {fs::names $dir queue cmd_*.json} queued]} { set queued {} }
    foreach f $queued {
        if {[parse_name $f] ne ""} { incr n }
    }
    dict set out queue_depth $n
    dict set out resume_cursor [fs::size $dir log session.out] ;# Before the liveness watch.
    lassign [Alive $dir] alive why
    dict set out alive $alive
    dict set out alive_reason $why
    dict set out can_serve [expr {$alive && [dict get $st phase] ni {error stopping}}]
    StatusDetails $dir out $st $hb
    return $out
}

# StatusDetails adds to the status dict in outVar what the Go master's
# Status adds from state.json (st), the heartbeat (hb) and the session's
# files: the running command's figures, heartbeat_age_ns, lease,
# last_results.
proc ::skillpilot::StatusDetails {dir outVar st hb} {
    upvar 1 $outVar out
    set hbTime [fs::regular_mtime $dir state heartbeat.json]
    dict set out heartbeat_age_ns [expr {$hbTime eq "" ? 0 : ([::tcl::clock::milliseconds] - $hbTime * 1000) * 1000000}]
    set cur [dict get $out current_cmd_id]
    if {$cur ne ""} {
        # All three times are the runner's clock: no skew.
        set now [TimeMs [DictGet $hb timestamp]]
        set upd [TimeMs [DictGet $st updated_at]]
        if {$now eq "" || ($upd ne "" && $upd > $now)} { set now $upd }
        set start [TimeMs [DictGet $st current_start_ts]]
        if {$now eq ""} { set now 0 }
        if {$start eq ""} { set start 0 }
        dict set out current_elapsed_ns [expr {max($now - $start, 0) * 1000000}]
        # The heartbeat's count and state.json's, each as of its own write:
        # the larger is the newer.
        set n 0
        if {[DictGet $hb current_cmd_id] eq $cur} { set n [IntOf [DictGet $hb current_output_bytes]] }
        set n [expr {max($n, [IntOf [DictGet $st current_output_bytes]])}]
        if {$n > 0} { dict set out current_output_bytes $n }
        set line [DictGet $st current_last_line]
        if {$line ne ""} { dict set out current_last_line $line }
        if {[dict exists $st current_quiet_ms] && [string is entier -strict [dict get $st current_quiet_ms]]} {
            dict set out current_quiet_ns [expr {[dict get $st current_quiet_ms] * 1000000}]
        }
        foreach k {current_trace_id current_labels} {
            if {[DictGet $st $k] ne ""} { dict set out $k [dict get $st $k] }
        }
    }
    foreach k {skipped_count rejected_count} {
        if {[IntOf [DictGet $st $k]] > 0} { dict set out $k [dict get $st $k] }
    }
    if {[DictGet $st disk_full] in {1 true}} { dict set out disk_full 1 }
    set lease [LeaseStatus $dir $hb $hbTime [DictGet $st lease_error]]
    if {$lease ne ""} { dict set out lease $lease }
    set last [LastResults $dir 5]
    if {[llength $last]} { dict set out last_results $last }
}

# LeaseStatus is the lease as the Go master's leaseStatus sees it (a dict:
# lease_id, ttl_ms, owner, remaining_ns, error), "" without one.
proc ::skillpilot::LeaseStatus {dir hb hbTime runnerErr} {
    set ls [dict create remaining_ns 0]
    if {$runnerErr ne ""} { dict set ls error $runnerErr }
    set text [fs::read_quiet $dir state lease.json 65536]
    if {$text eq ""} {
        if {[fs::exists $dir state lease.json]} {
            if {$runnerErr eq ""} { dict set ls error "state/lease.json: not a regular file, or empty" }
            return $ls
        }
        return [expr {$runnerErr eq "" ? "" : $ls}]
    }
    if {[catch {json::parse $text} l] || [catch {dict size $l}]} {
        if {$runnerErr eq ""} { dict set ls error "lease.json: not a JSON object" }
        return $ls
    }
    set ttl [DictGet $l ttl_ms]
    if {$ttl eq ""} { set ttl 0 }
    set expires [TimeMs [DictGet $l expires_at]]
    set why ""
    if {![string is entier -strict $ttl]} {
        set why "ttl_ms must be an integer"
    } elseif {$ttl < 0} {
        set why "ttl_ms must not be negative"
    } elseif {$ttl == 0 && $expires eq ""} {
        set why "a lease needs expires_at or ttl_ms"
    }
    if {$why ne ""} {
        if {$runnerErr eq ""} { dict set ls error "lease.json: $why" }
        return $ls
    }
    dict set ls lease_id [DictGet $l lease_id]
    if {$ttl > 0} { dict set ls ttl_ms $ttl }
    if {[DictGet $l owner] ne ""} { dict set ls owner [dict get $l owner] }
    set lt [fs::regular_mtime $dir state lease.json]
    if {$ttl > 0} {
        if {$hbTime ne "" && $lt ne ""} {
            dict set ls remaining_ns [expr {($ttl - max($hbTime - $lt, 0) * 1000) * 1000000}]
        }
    } elseif {[set ts [TimeMs [DictGet $hb timestamp]]] ne ""} {
        dict set ls remaining_ns [expr {($expires - $ts) * 1000000}]
    }
    return $ls
}

# LastResults is the n results with the highest seqs, newest first: a list
# of dicts cmd_id, seq, status, duration_ms, and exit_reason, end_ts,
# trace_id when set (the Go master's ResultBrief).
proc ::skillpilot::LastResults {dir n} {
    if {[catch {fs::names $dir result cmd_*.json} names]} { return {} }
    set all {}
    foreach name $names {
        set p [parse_name $name]
        if {$p ne ""} { lappend all [::list [lindex $p 0] $name [lindex $p 1]] }
    }
    set out {}
    foreach e [lrange [lsort -integer -decreasing -index 0 $all] 0 [expr {$n - 1}]] {
        lassign $e seq name id
        set r [read_json $dir result $name 1]
        if {$r eq ""} { continue }
        set b [dict create cmd_id [expr {[DictGet $r cmd_id] ne "" ? [dict get $r cmd_id] : $id}] seq $seq \
                   status [DictGet $r status] duration_ms [IntOf [DictGet [DictGet $r stats] duration_ms]]]
        foreach k {exit_reason end_ts trace_id} {
            if {[DictGet $r $k] ne ""} { dict set b $k [dict get $r $k] }
        }
        lappend out $b
    }
    return $out
}

# DictGet is d's value at key, "" when d is not a dict or has no such key.
proc ::skillpilot::DictGet {d key} {
    if {[catch {dict exists $d $key} has] || !$has} { return "" }
    return [dict get $d $key]
}

# IntOf is v when it is an integer, else 0.
proc ::skillpilot::IntOf {v} {
    return [expr {[string is entier -strict $v] ? $v : 0}]
}

# TimeMs is a protocol timestamp in Unix milliseconds: RFC 3339 text (an
# offset, Z, or none: UTC), or a number of milliseconds; "" when absent or
# unreadable.
proc ::skillpilot::TimeMs {v} {
    if {[string is entier -strict $v]} { return $v }
    if {![regexp {^(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:?\d\d)?$} $v -> d t frac zone]} {
        return ""
    }
    if {[catch {clock scan "$d $t" -format "%Y-%m-%d %H:%M:%S" -gmt 1} sec]} { return "" }
    set ms [expr {$sec * 1000 + [scan [string range "${frac}000" 0 2] %d]}]
    if {[regexp {^([+-])(\d\d):?(\d\d)$} $zone -> sign hh mm]} {
        set off [expr {([scan $hh %d] * 60 + [scan $mm %d]) * 60000}]
        set ms [expr {$sign eq "+" ? $ms - $off : $ms + $off}]
    }
    return $ms
}

# ready waits until a live runner serves the session (phase idle or busy)
# and returns its status. RUNNER_NOT_ALIVE once no live runner has been
# seen for -waitforrunner ms (a runner that gave up on a failing --init has
# stopped); on -timeout CANNOT_SERVE when the runner is alive in phase error
# (with its reason), else WAIT_TIMEOUT. The directory may not exist yet.
proc ::skillpilot::ready {dir args} {
    variable waitForRunnerMs
    set o [Opts [list -timeout 60000 -waitforrunner $waitForRunnerMs] $args]
    set start [::tcl::clock::milliseconds]
    set end [expr {$start + [dict get $o -timeout]}]
    set w ""
    while 1 {
        if {$w eq "" && ![catch {check $dir} d]} {
            set dir $d
            # The whole grace even when the runner stopped on purpose:
            # ready is how a caller waits for a runner to be started again.
            set w [WaitStart $dir -1 [dict get $o -waitforrunner] 0 0]
            dict set w lastAlive $start
        }
        if {$w ne ""} {
            dict set w nextLook 0
            dict set w delay 0
            WaitStep w "no runner ready"
            set look [dict get $w look]
            if {[dict get $look alive] && [Phase [dict get $look state]] in {idle busy}} { return [status $dir] }
        } elseif {[::tcl::clock::milliseconds] - $start > [Grace [dict get $o -waitforrunner] 0]} {
            ThrowCtx RUNNER_NOT_ALIVE "runner not alive: $dir is not a session yet" \
                [dict create dir $dir reason "not a session yet" grace_ms [Grace [dict get $o -waitforrunner] 0]]
        }
        if {[::tcl::clock::milliseconds] >= $end} {
            if {$w ne "" && [Phase [dict get $w look state]] eq "error"} {
                set st [dict get $w look state]
                Throw CANNOT_SERVE "no runner ready within [dict get $o -timeout] ms: the runner cannot serve\
                    (phase error: [expr {[dict exists $st reason] ? [dict get $st reason] : ""}])"
            }
            Throw WAIT_TIMEOUT "no runner ready within [dict get $o -timeout] ms"
        }
        after 50
    }
}

# waitfor waits until the regular expression re matches log/session.out at
# or after byte cursor -from, and returns the waitfor reply of every master
# (PROTOCOL.md section 19, "Cursors") as a dict: matched 1, match_text (the
# matched bytes), match_span {start S end E} (byte offsets [S, E)) and
# resume_cursor (E: where the next waitfor starts). Options: -from,
# -timeout ms, -waitforrunner ms. On timeout the error code is {SKILLPILOT
# WAIT_TIMEOUT <resume_cursor>}, resume_cursor being the spool size (no
# match fields); RUNNER_NOT_ALIVE carries it the same way.
# SpoolCut is state.json's retention.spool_cut: where the spool's data
# goes on after what the session's retention cut from it (0: nothing cut).
proc ::skillpilot::SpoolCut {dir} {
    fs::revalidate $dir state
    set st [read_json $dir state state.json 1]
    if {[catch {dict get $st retention spool_cut} cut] || ![string is entier -strict $cut] || $cut < 0} {
        return 0
    }
    return $cut
}

proc ::skillpilot::waitfor {dir re args} {
    variable waitForRunnerMs
    set o [Opts [list -from 0 -timeout -1 -waitforrunner $waitForRunnerMs] $args]
    set dir [check $dir]
    set from [dict get $o -from]
    # Below the retention's cut the spool's bytes are holes that read as
    # zeros (PROTOCOL.md section 23): an old cursor starts at the cut.
    set from [expr {max($from, [SpoolCut $dir])}]
    set buf ""
    set bufStart $from
    set readAt $from
    set w [WaitStart $dir [dict get $o -timeout] [dict get $o -waitforrunner]]
    while 1 {
        set chunk [fs::read_range $dir log session.out $readAt]
        append buf $chunk
        incr readAt [string length $chunk]
        if {[regexp -indices -- $re $buf m]} {
            lassign $m s e
            set end [expr {$bufStart + $e + 1}]
            return [dict create matched 1 match_text [string range $buf $s $e] \
                        match_span [dict create start [expr {$bufStart + $s}] end $end] resume_cursor $end]
        }
        if {[string length $buf] > 65536} {
            set cut [expr {[string length $buf] - 65536}]
            set buf [string range $buf $cut end]
            incr bufStart $cut
        }
        if {[catch {WaitStep w "no match for $re"} msg opts]} {
            set ec [dict get $opts -errorcode]
            if {[lindex $ec 1] in {WAIT_TIMEOUT RUNNER_NOT_ALIVE}} {
                set cur [expr {max($readAt, [fs::size $dir log session.out])}]
                dict set opts -errorcode [list SKILLPILOT [lindex $ec 1] $cur]
                set ctx [expr {[dict exists $opts -context] ? [dict get $opts -context] : {}}]
                dict set opts -context [dict merge $ctx [dict create resume_cursor $cur]]
            }
            return -options $opts $msg
        }
    }
}
