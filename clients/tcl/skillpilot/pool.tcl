# SkillPilot pools from Tcl 8.6 (no extra packages), e.g. inside an EDA
# tool. A pool is a directory of session directories s00, s01, ... started
# by `master pool start` (PROTOCOL.md, "Pools").
#
#   source skillpilot_pool.tcl
#   set w [skillpilot::pool_submit /proj/pool {report_timing} -affinity corner_ss]
#   set r [skillpilot::pool_wait /proj/pool $w 600000]
#   puts "[dict get $w session] [dict get $r status]"
#
# Selection is the Go master's (master.Pool): a session is alive when its
# phase is not "stopped" and heartbeat.json is at most 2 x interval_ms + 1 s
# old on the filesystem's clock (its mtime against <pool>/.clock, which we
# write; Tcl's mtime has whole seconds, so the age is known to +-1 s).
# Choosing reads two sessions, not all (the power of two choices):
# sessions are judged in a random order until two are alive in phase idle
# or busy, and the less loaded of the two wins (load: queued plus claimed
# commands without a result), ties to the smaller name. With fewer than two
# serving, all were judged and the least loaded of those serving (else of
# the alive ones) wins, ties to the smallest name. An affinity key pins related commands to one
# session (<pool>/affinity/<key>.json, created exclusively with a hard
# link) while that session is alive. On a local filesystem a free
# runner.lock (read from /proc/locks, fs::lock_held) is dead, as in the Go
# master. Moving commands out
# of dead sessions is `master pool heal`'s job.
#
# Errors: -errorcode {SKILLPILOT RUNNER_NOT_ALIVE} when no session is
# alive, {SKILLPILOT wait_timeout} from pool_wait, {SKILLPILOT usage};
# pool_wait also raises {SKILLPILOT SESSION_MISSING} and
# {SKILLPILOT RUNNER_NOT_ALIVE} (see pool_wait).
# The few protocol primitives used are defined here (namespace
# ::skillpilot::poolimpl); every file operation is fs.tcl's
# (::skillpilot::fs), sourced from beside this file when not yet loaded.

namespace eval ::skillpilot {}
# Sourced alone (skillpilot_pool.tcl) rather than by package require: the
# package's files pool_submit shares with submit (fs, json, names, the
# command's options) are sourced from beside this file.
if {[info commands ::skillpilot::CommandFields] eq ""} {
    apply {{dir} {
        foreach f {fs.tcl json.tcl files.tcl skillpilot.tcl} {
            set p [file join $dir $f]
            set c [open $p r]
            fconfigure $c -encoding utf-8
            set s [read $c]
            close $c
            set was [info script]
            info script $p
            try {uplevel #0 $s} finally {info script $was}
        }
    }} [file dirname [file normalize [info script]]]
}
namespace eval ::skillpilot::poolimpl {}

# rnd returns a random 31-bit number from /dev/urandom (the host
# interpreter's rand() is left alone: reseeding it would change an EDA
# script's own random sequence).
proc ::skillpilot::poolimpl::rnd {} {
    if {[binary scan [::skillpilot::fs::urandom 4] iu n] == 1} { return [expr {$n & 0x7fffffff}] }
    return [expr {([::tcl::clock::clicks] ^ ([pid] << 16)) & 0x7fffffff}]
}

proc ::skillpilot::poolimpl::field {json key} {
    if {[regexp "\"$key\":\\s*\"((?:\[^\"\\\\\]|\\\\.)*)\"" $json -> raw]} {
        return [subst -nocommands -novariables $raw]
    }
    if {[regexp "\"$key\":\\s*(-?\[0-9.eE+-\]+|true|false|null)" $json -> raw]} {
        if {$raw eq "null"} { return "" }
        return $raw
    }
    return ""
}

# alloc_seq: PROTOCOL.md section 5, exclusive create of seq/<n> (seq/
# made when no runner has made it yet), as skillpilot::submit allocates.
proc ::skillpilot::poolimpl::alloc_seq {sdir} {
    ::skillpilot::fs::mkdir $sdir seq
    return [::skillpilot::alloc_seq $sdir]
}

proc ::skillpilot::poolimpl::commands {sdir sub} {
    set out {}
    if {[catch {::skillpilot::fs::names $sdir $sub cmd_*.json} names]} { return {} }
    foreach n $names {
        if {[regexp {^cmd_[0-9]{1,18}_[A-Za-z0-9._-]{1,128}\.json$} $n]} { lappend out $n }
    }
    return $out
}

# sessions: s00, s01, ... in name order.
proc ::skillpilot::pool_sessions {pool} {
    set out {}
    foreach n [::skillpilot::fs::names $pool "" s*] {
        if {[regexp {^s[0-9]+$} $n] && [::skillpilot::fs::is_plain_dir $pool $n]} { lappend out $n }
    }
    return [lsort $out]
}

# poolimpl::now: the filesystem's clock (the mtime of <pool>/.clock, just written).
proc ::skillpilot::poolimpl::now {pool} {
    ::skillpilot::fs::write_atomic $pool "" .clock x
    return [::skillpilot::fs::mtime $pool "" .clock]
}

# poolimpl::view: one session judged against the filesystem time now.
proc ::skillpilot::poolimpl::view {pool name now} {
    set s [::skillpilot::fs::path $pool "" $name]
    ::skillpilot::fs::revalidate $s state
    set st [::skillpilot::fs::read_quiet $s state state.json]
    set hb [::skillpilot::fs::read_quiet $s state heartbeat.json]
    set queue [llength [commands $s queue]]
    set inflight 0
    foreach n [commands $s inflight] {
        if {![::skillpilot::fs::exists $s result $n]} { incr inflight }
    }
    set v [dict create session $name phase "" alive 0 dead 1 queue_depth $queue inflight $inflight load [expr {$queue + $inflight}]]
    if {$st ne "" && $hb ne "" && ![catch {::skillpilot::fs::mtime $s state heartbeat.json} hbt]} {
        set phase [field $st phase]
        dict set v phase $phase
        set iv [field $hb interval_ms]
        if {![string is integer -strict $iv] || $iv < 100} { set iv 100 }
        set window [expr {2 * $iv + 1000}]
        set age [expr {max(($now - $hbt) * 1000, 0)}]
        set stopped [expr {$phase eq "stopped" || [field $hb phase] eq "stopped"}]
        set lockFree [expr {!$stopped && ![network $pool] && [::skillpilot::fs::lock_held $s state runner.lock] == 0}]
        dict set v alive [expr {!$stopped && !$lockFree && $age <= $window}]
        dict set v dead [expr {$stopped || $lockFree || $age > max(10000, $window)}]
        if {$stopped} {
            dict set v why "the runner stopped: [field $st reason]"
        } elseif {$lockFree} {
            dict set v why "the runner's lock is free"
        } else {
            dict set v why "heartbeat [expr {$age / 1000.0}]s old"
        }
    } else {
        dict set v why "no runner has written state yet"
    }
    return $v
}

# poolimpl::network: whether the pool is on a network filesystem, where a
# free lock proves nothing (only a local filesystem's lock is probed, as
# by the Go and Python masters).
proc ::skillpilot::poolimpl::network {pool} {
    variable netCache
    if {![info exists netCache($pool)]} { set netCache($pool) [lindex [::skillpilot::fs::fs_type $pool] 1] }
    return $netCache($pool)
}

# pool_views: a list of dicts session phase alive dead queue_depth inflight load.
proc ::skillpilot::pool_views {pool} {
    set now [poolimpl::now $pool]
    set out {}
    foreach name [pool_sessions $pool] {
        lappend out [poolimpl::view $pool $name $now]
    }
    return $out
}

# poolimpl::judge: the view of session name, judged once (cached in the
# dict variable named judgedVar).
proc ::skillpilot::poolimpl::judge {pool name now judgedVar} {
    upvar 1 $judgedVar judged
    if {![dict exists $judged $name]} { dict set judged $name [view $pool $name $now] }
    return [dict get $judged $name]
}

# poolimpl::two_choices: the power of two choices. Sessions are judged in
# a random order until two serve (alive, phase idle or busy); the less
# loaded wins, ties to the smaller name. With fewer than two serving, all
# were judged and least_loaded decides among them.
proc ::skillpilot::poolimpl::two_choices {pool names now judgedVar} {
    upvar 1 $judgedVar judged
    set order $names
    set n [llength $order]
    set found {}
    for {set i 0} {$i < $n && [llength $found] < 2} {incr i} {
        set j [expr {$i + [rnd] % ($n - $i)}]
        set a [lindex $order $i]
        lset order $i [lindex $order $j]
        lset order $j $a
        set v [judge $pool [lindex $order $i] $now judged]
        if {[dict get $v alive] && [dict get $v phase] in {idle busy}} { lappend found $v }
    }
    if {[llength $found] < 2} {
        set seen {}
        foreach name $names {
            if {[dict exists $judged $name]} { lappend seen [dict get $judged $name] }
        }
        return [least_loaded $seen]
    }
    lassign $found a b
    if {[dict get $b load] < [dict get $a load] || ([dict get $b load] == [dict get $a load] && [dict get $b session] < [dict get $a session])} {
        set a $b
    }
    return $a
}

proc ::skillpilot::poolimpl::least_loaded {views {except ""}} {
    foreach serving {1 0} {
        set best ""
        foreach v $views {
            if {[dict get $v session] eq $except || ![dict get $v alive]} continue
            if {$serving && [dict get $v phase] ni {idle busy}} continue
            if {$best eq "" || [dict get $v load] < [dict get $best load]} { set best $v }
        }
        if {$best ne ""} { return $best }
    }
    return ""
}

proc ::skillpilot::poolimpl::read_pin {pool key} {
    ::skillpilot::fs::revalidate $pool affinity
    return [field [::skillpilot::fs::read_quiet $pool affinity $key.json] session]
}

# write_pin: exclusive (hard link of a complete temp file) unless replace.
proc ::skillpilot::poolimpl::write_pin {pool key session replace} {
    ::skillpilot::fs::mkdir $pool affinity
    set data "\{\"protocol_version\":1,\"key\":[::skillpilot::json::string $key],\"session\":[::skillpilot::json::string $session],\"ts\":[::skillpilot::json::string [::tcl::clock::format [::tcl::clock::seconds] -format %Y-%m-%dT%H:%M:%SZ -gmt 1]]\}"
    if {$replace} {
        ::skillpilot::fs::write_atomic $pool affinity $key.json $data
        return $session
    }
    if {![::skillpilot::fs::link_exclusive $pool affinity $key.json $data]} { return [read_pin $pool $key] }
    return $session
}

# pool_pick: the session a command would go to now. Options: -affinity KEY.
proc ::skillpilot::pool_pick {pool args} {
    set opts [dict merge {-affinity ""} $args]
    set key [dict get $opts -affinity]
    if {$key ne "" && ![regexp {^[A-Za-z0-9._-]{1,128}$} $key]} {
        return -code error -errorcode {SKILLPILOT usage} "affinity key \"$key\": use 1-128 characters of \[A-Za-z0-9._-\]"
    }
    set now [poolimpl::now $pool]
    set names [pool_sessions $pool]
    set judged [dict create]
    set pinned ""
    if {$key ne ""} {
        set pinned [poolimpl::read_pin $pool $key]
        if {$pinned ne "" && $pinned in $names && [dict get [poolimpl::judge $pool $pinned $now judged] alive]} { return $pinned }
    }
    set best [poolimpl::two_choices $pool $names $now judged]
    if {$best eq ""} {
        return -code error -errorcode {SKILLPILOT RUNNER_NOT_ALIVE} "no live session in pool $pool"
    }
    set name [dict get $best session]
    if {$key ne ""} {
        set won [poolimpl::write_pin $pool $key $name [expr {$pinned ne ""}]]
        if {$won ne "" && $won in $names && [dict get [poolimpl::judge $pool $won $now judged] alive]} { return $won }
    }
    return $name
}

# pool_submit: queue payload in the chosen session. Options: -affinity KEY
# and every option of skillpilot::submit (its one table, submitOptions):
# -kind (default: the chosen session's runner's, else tcl), -timeout
# SECONDS, -cancel_policy, -max_output_bytes, -cmd_id ID (default: a new
# UUIDv7), -trace_id T, -labels DICT; each checked as submit checks it,
# before anything is written. Returns a dict session cmd_id name
# resume_cursor (that session's spool size before the command was queued,
# as every master's submit reply: PROTOCOL.md section 19, "Cursors").
proc ::skillpilot::pool_submit {pool payload args} {
    set opts [::skillpilot::Opts [dict merge {-affinity ""} $::skillpilot::submitOptions] $args]
    set key [dict get $opts -affinity]
    # The options are checked before a session is chosen: a wrong one
    # writes nothing, not even an affinity pin.
    set pre [dict remove $opts -affinity]
    if {[dict get $pre -kind] eq ""} { dict set pre -kind tcl } ;# The session's kind is known once it is chosen.
    ::skillpilot::CommandFields $pool $pre
    set session [pool_pick $pool -affinity $key]
    set sdir [poolimpl::member $pool $session]
    lassign [::skillpilot::CommandFields $sdir [dict remove $opts -affinity]] id fields
    set seq [poolimpl::alloc_seq $sdir]
    set extra [expr {$key ne "" ? ",\"affinity\":[::skillpilot::json::string $key]" : ""}]
    set json [::skillpilot::CommandJSON $id $seq $payload $fields tcl-pool@[info hostname]:[pid] $extra]
    set name [::skillpilot::CommandName $seq $id]
    set cursor [::skillpilot::fs::size $sdir log session.out]
    # Through the pool's directory: the member itself is checked again
    # (lstat, no symlink) as part of the path written.
    ::skillpilot::fs::write_atomic $pool $session/queue $name $json
    return [dict create session $session cmd_id $id name $name resume_cursor $cursor]
}

# poolimpl::member returns the directory of the pool's member session,
# refusing (IO_ERROR) one that is not a plain directory: a member swapped
# for a symlink after pool_pick listed it is never written through. Tcl
# 8.6 has no openat: an lstat, then the path, so every write
# of pool_submit goes through fs::write_atomic with the member as a
# component it checks again.
proc ::skillpilot::poolimpl::member {pool session} {
    if {![regexp {^s[0-9]+$} $session] || ![::skillpilot::fs::is_plain_dir $pool $session]} {
        ::skillpilot::Throw IO_ERROR "[file join $pool $session]: not a directory of the pool (a symlink?), refused"
    }
    return [::skillpilot::fs::path $pool "" $session]
}

# pool_locate: follow forward/ records; returns {session-dir name}.
proc ::skillpilot::pool_locate {pool where} {
    set sdir [::skillpilot::fs::path $pool "" [dict get $where session]]
    set name [dict get $where name]
    for {set i 0} {$i < 16} {incr i} {
        ::skillpilot::fs::revalidate $sdir result
        if {[::skillpilot::fs::exists $sdir result $name]} break
        set fwd [::skillpilot::fs::read_quiet $sdir forward $name]
        set to [poolimpl::field $fwd to_name]
        if {$to eq "" || [file tail $to] ne $to} break
        set sdir [::skillpilot::fs::relative $sdir [poolimpl::field $fwd to_session]]
        set name $to
    }
    return [list $sdir $name]
}

# gone_message and claimed_dead_message: the words every master's pool
# wait uses (PROTOCOL.md section 18.6).
proc ::skillpilot::poolimpl::gone_message {id session} {
    return "command $id: session $session is gone (its directory was deleted); no result will come"
}
proc ::skillpilot::poolimpl::claimed_dead_message {id session} {
    return "command $id: claimed by $session, whose runner is gone; it gets its result (runner_restarted) when a runner starts on $session (master pool heal with respawn, or master launch)"
}

# poolimpl::stuck raises when the command at sdir/name can get no result
# without help: {SKILLPILOT SESSION_MISSING} when its session directory is
# gone, {SKILLPILOT RUNNER_NOT_ALIVE} when a dead session claimed it and
# the pool does not respawn (pool.json), each with a -context dict
# (cmd_id, session, and dir or reason). It returns why a command queued in
# a dead session cannot move (no session of the pool is alive), which
# pool_wait makes final after 10 s as the Go master does, or "".
proc ::skillpilot::poolimpl::stuck {pool where sdir name} {
    set session [file tail $sdir]
    set id [dict get $where cmd_id]
    if {![::skillpilot::fs::is_plain_dir $pool $session]} {
        return -code error -level 2 -errorcode {SKILLPILOT SESSION_MISSING} \
            -context [dict create cmd_id $id session $session dir $sdir] [gone_message $id $session]
    }
    if {[::skillpilot::fs::exists $sdir result $name]} { return "" }
    if {[field [::skillpilot::fs::read_quiet $pool "" pool.json] respawn] eq "true"} { return "" }
    set claimed [::skillpilot::fs::exists $sdir inflight $name]
    if {!$claimed && ![::skillpilot::fs::exists $sdir queue $name] && ![::skillpilot::fs::exists $sdir moved $name]} { return "" }
    set now [now $pool]
    set v [view $pool $session $now]
    if {![dict get $v dead]} { return "" }
    if {$claimed} {
        return -code error -level 2 -errorcode {SKILLPILOT RUNNER_NOT_ALIVE} \
            -context [dict create cmd_id $id session $session reason [dict get $v why]] [claimed_dead_message $id $session]
    }
    foreach other [::skillpilot::pool_sessions $pool] {
        if {$other ne $session && [dict get [view $pool $other $now] alive]} { return "" }
    }
    return "no live session in the pool to move it to"
}

# pool_wait: the result of a pool_submit command wherever it was moved, as
# the dict skillpilot::result gives (every field of the result file, name,
# error_code, error_message), with session_dir (where it ran) and json (the
# whole result file). timeout_ms -1 waits forever.
# As every master's pool wait (PROTOCOL.md section 18.6) it ends at once
# with {SKILLPILOT SESSION_MISSING} when the session holding the command
# was deleted and {SKILLPILOT RUNNER_NOT_ALIVE} when a dead session
# claimed it and the pool does not respawn (after 10 s when it is queued
# in a dead session and no session is alive to take it); {SKILLPILOT
# wait_timeout} once timeout_ms has passed. Commands queued in a dead session are moved by the
# Go master's heal (master pool heal --every, adapt), not here.
proc ::skillpilot::pool_wait {pool where {timeout_ms -1}} {
    set deadline [expr {$timeout_ms < 0 ? -1 : [::tcl::clock::milliseconds] + $timeout_ms}]
    set nextCheck [expr {[::tcl::clock::milliseconds] + 50}] ;# A short command's wait pays for no look (as Go's).
    set stuckSince -1
    while 1 {
        lassign [pool_locate $pool $where] sdir name
        set r [::skillpilot::fs::read_quiet $sdir result $name]
        if {$r eq "" && [::tcl::clock::milliseconds] >= $nextCheck} {
            set nextCheck [expr {[::tcl::clock::milliseconds] + 1000}]
            if {[catch {poolimpl::stuck $pool $where $sdir $name} why opts]} {
                set r [::skillpilot::fs::read_quiet $sdir result $name]
                if {$r eq ""} { return -options [dict incr opts -level] $why }
            } elseif {$why eq ""} {
                set stuckSince -1
            } elseif {$stuckSince < 0} {
                set stuckSince [::tcl::clock::milliseconds]
            } elseif {[::tcl::clock::milliseconds] - $stuckSince > 10000} {
                set id [dict get $where cmd_id]
                return -code error -errorcode {SKILLPILOT RUNNER_NOT_ALIVE} -context [dict create cmd_id $id reason $why] "command $id: $why"
            }
        }
        if {$r ne "" && ![catch {::skillpilot::json::parse $r} parsed]} {
            return [dict merge [::skillpilot::ResultDict $parsed $name] [dict create session_dir $sdir json $r]]
        }
        if {$deadline >= 0 && [::tcl::clock::milliseconds] > $deadline} {
            return -code error -errorcode {SKILLPILOT wait_timeout} "no result for [dict get $where cmd_id] within $timeout_ms ms"
        }
        after 50
    }
}
