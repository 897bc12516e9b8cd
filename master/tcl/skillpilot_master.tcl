# SkillPilot master for Tcl 8.6 (no extra packages), usable inside any
# Tcl-based EDA tool. It follows PROTOCOL.md: seq allocation by exclusive
# create in seq/ (open ... {WRONLY CREAT EXCL}), atomic writes (temp file
# + file rename), results in result/, control files in ctl/.
#
#   source skillpilot_master.tcl
#   set r [skillpilot::run /path/to/session {puts hello; expr 6*7}]
#   puts "[dict get $r status] [dict get $r value]"
#   puts [skillpilot::output /path/to/session $r]
#
# Errors are raised with -errorcode {SKILLPILOT <code>}, <code> one of
# session_missing wait_timeout command_failed command_timeout cancelled.

namespace eval ::skillpilot {
    variable version 1
    variable seqWidth 10
    variable pollMs 50
    variable leaseCounter 0
    expr {srand([clock clicks] ^ [pid])}
}

proc ::skillpilot::check {dir} {
    if {![file isdirectory [file join $dir queue]]} {
        return -code error -errorcode {SKILLPILOT session_missing} "not a session directory: $dir"
    }
    file mkdir [file join $dir seq]
    return [file normalize $dir]
}

proc ::skillpilot::write_atomic {path data} {
    set tmp [file join [file dirname $path] ".[file tail $path].[pid].[expr {int(rand()*1e9)}].tmp"]
    set f [open $tmp w]
    fconfigure $f -encoding utf-8 -translation lf
    puts -nonewline $f $data
    close $f
    file rename -force $tmp $path
}

proc ::skillpilot::json_str {s} {
    set s [string map {\\ \\\\ \" \\\" \n \\n \r \\r \t \\t} $s]
    # Other control characters as \u00XX.
    while {[regexp -indices {[\x00-\x1f]} $s idx]} {
        set i [lindex $idx 0]
        scan [string index $s $i] %c code
        set s [string replace $s $i $i [format \\u%04x $code]]
    }
    return "\"$s\""
}

proc ::skillpilot::new_cmd_id {} {
    return [format "tcl-%d-%d-%08x" [clock milliseconds] [pid] [expr {int(rand()*0x7fffffff)}]]
}

proc ::skillpilot::max_reserved {dir} {
    set m 0
    foreach f [glob -nocomplain -tails -directory [file join $dir seq] {[0-9]*}] {
        if {[string is digit -strict $f] && [scan $f %lld] > $m} { set m [scan $f %lld] }
    }
    return $m
}

# alloc_seq reserves the next seq: exclusive create of seq/<n>.
proc ::skillpilot::alloc_seq {dir} {
    variable seqWidth
    set hint [file join $dir seq hint]
    set n -1
    if {![catch {open $hint r} f]} {
        set txt [string trim [read $f]]
        close $f
        if {[string is digit -strict $txt]} { set n [scan $txt %lld] }
    }
    if {$n < 0} { set n [max_reserved $dir] }
    set tries 0
    while 1 {
        incr n
        set p [file join $dir seq [format %0*lld $seqWidth $n]]
        if {![catch {open $p {WRONLY CREAT EXCL}} f]} {
            close $f
            break
        }
        if {![file exists $p]} { return -code error "cannot reserve seq $n: $f" }
        if {[incr tries] % 64 == 0} {
            set m [max_reserved $dir]
            if {$m > $n} { set n $m }
        }
    }
    set cur -1
    if {![catch {open $hint r} f]} {
        set txt [string trim [read $f]]
        close $f
        if {[string is digit -strict $txt]} { set cur [scan $txt %lld] }
    }
    if {$cur < $n} { catch {write_atomic $hint "$n\n"} }
    return $n
}

# submit queues payload; options -kind -timeout (seconds) -cancel_policy
# -cmd_id. Returns the command's file name.
proc ::skillpilot::submit {dir payload args} {
    variable version
    variable seqWidth
    set dir [check $dir]
    set opts [dict merge {-kind tcl -timeout 0 -cancel_policy "" -cmd_id ""} $args]
    set id [dict get $opts -cmd_id]
    if {$id eq ""} { set id [new_cmd_id] }
    set seq [alloc_seq $dir]
    set json "\{\"protocol_version\":$version,\"cmd_id\":[json_str $id],\"seq\":$seq,\"kind\":[json_str [dict get $opts -kind]],\"payload\":[json_str $payload]"
    if {[dict get $opts -timeout] > 0} { append json ",\"timeout_s\":[dict get $opts -timeout]" }
    if {[dict get $opts -cancel_policy] ne ""} { append json ",\"cancel_policy\":[json_str [dict get $opts -cancel_policy]]" }
    append json ",\"submitter\":[json_str tcl-master@[info hostname]:[pid]]\}"
    set name [format "cmd_%0*lld_%s.json" $seqWidth $seq $id]
    write_atomic [file join $dir queue $name] $json
    return $name
}

# json_field extracts a top-level string, number, boolean or null field of
# a result file (as the runner writes them) without a JSON package.
proc ::skillpilot::json_field {json key} {
    if {[regexp "\"$key\":\\s*\"((?:\[^\"\\\\\]|\\\\.)*)\"" $json -> raw]} {
        return [subst -nocommands -novariables $raw]
    }
    if {[regexp "\"$key\":\\s*(-?\[0-9.eE+-\]+|true|false|null)" $json -> raw]} {
        if {$raw eq "null"} { return "" }
        return $raw
    }
    return ""
}

proc ::skillpilot::find {dir cmd} {
    if {[string match cmd_* $cmd]} { return $cmd }
    foreach d {result inflight queue} {
        set hits [glob -nocomplain -tails -directory [file join $dir $d] "cmd_*_$cmd.json"]
        if {[llength $hits]} { return [lindex $hits 0] }
    }
    return -code error "no command $cmd in this session"
}

# revalidate opens a directory (the open fails in Tcl, but the system call
# has been made): on NFS that drops cached negative lookups, so a file
# another host just created becomes visible (else it can take 30-60 s).
proc ::skillpilot::revalidate {dir} {
    catch {close [open $dir r]}
}

# result returns the result as a dict, or "" if there is none yet.
proc ::skillpilot::result {dir cmd} {
    set name [find $dir $cmd]
    revalidate [file join $dir result]
    set p [file join $dir result $name]
    if {[catch {open $p r} f]} { return "" }
    fconfigure $f -encoding utf-8
    set json [read $f]
    close $f
    set r [dict create name $name]
    foreach k {cmd_id seq status exit_reason tool_rc value value_truncated output_path exit_code signal} {
        dict set r $k [json_field $json $k]
    }
    set err ""
    if {[regexp {"error":\s*\{([^\}]*)\}} $json -> inner]} {
        dict set r error_code [json_field "{$inner}" code]
        dict set r error_message [json_field "{$inner}" message]
    } else {
        dict set r error_code ""
        dict set r error_message ""
    }
    return $r
}

# wait returns the result dict; timeout_ms < 0 waits forever. With check 1
# a status other than ok raises an error with -errorcode {SKILLPILOT code}.
proc ::skillpilot::wait {dir cmd {timeout_ms -1} {check 1}} {
    variable pollMs
    set dir [check $dir]
    set name [find $dir $cmd]
    set deadline [expr {[clock milliseconds] + $timeout_ms}]
    while 1 {
        set r [result $dir $name]
        if {$r ne ""} {
            set st [dict get $r status]
            if {$check && $st ne "ok"} {
                set code [dict get {error command_failed timeout command_timeout cancelled cancelled} $st]
                return -code error -errorcode [list SKILLPILOT $code] "command [dict get $r cmd_id]: $st: [dict get $r error_message]"
            }
            return $r
        }
        if {$timeout_ms >= 0 && [clock milliseconds] > $deadline} {
            return -code error -errorcode {SKILLPILOT wait_timeout} "no result for $name within $timeout_ms ms"
        }
        after $pollMs
    }
}

proc ::skillpilot::run {dir payload args} {
    set name [submit $dir $payload {*}$args]
    return [wait $dir $name -1 0]
}

proc ::skillpilot::output {dir r} {
    revalidate [file join $dir output]
    set f [open [file join $dir [dict get $r output_path]] r]
    fconfigure $f -encoding utf-8
    set data [read $f]
    close $f
    return $data
}

proc ::skillpilot::cancel {dir {cmd_id ""}} {
    set dir [check $dir]
    if {$cmd_id eq ""} {
        set json {{"scope":"current"}}
    } else {
        set json "\{\"scope\":\"cmd_id\",\"cmd_id\":[json_str $cmd_id]\}"
    }
    write_atomic [file join $dir ctl cancel.json] $json
}

proc ::skillpilot::stop {dir {mode graceful} {wait 0}} {
    variable pollMs
    set dir [check $dir]
    write_atomic [file join $dir ctl stop.json] "\{\"mode\":[json_str $mode]\}"
    while {$wait} {
        if {[dict get [state $dir] phase] eq "stopped"} { return }
        after $pollMs
    }
}

proc ::skillpilot::read_file {p} {
    revalidate [file dirname $p]
    if {[catch {open $p r} f]} { return "" }
    set d [read $f]
    close $f
    return $d
}

proc ::skillpilot::state {dir} {
    set s [read_file [file join $dir state state.json]]
    return [dict create phase [json_field $s phase] current_cmd_id [json_field $s current_cmd_id] reason [json_field $s reason]]
}

# status adds liveness judged by the heartbeat counter moving within two
# heartbeat periods of this host's clock.
proc ::skillpilot::status {dir} {
    set dir [check $dir]
    set st [state $dir]
    set hb [read_file [file join $dir state heartbeat.json]]
    set c0 [json_field $hb counter]
    set iv [json_field $hb interval_ms]
    if {$iv eq ""} { set iv 1000 }
    set alive 0
    if {[dict get $st phase] ni {"" stopped}} {
        set end [expr {[clock milliseconds] + 2*$iv + 250}]
        while {[clock milliseconds] < $end} {
            if {[json_field [read_file [file join $dir state heartbeat.json]] counter] ne $c0} {
                set alive 1
                break
            }
            after 50
        }
    }
    dict set st alive $alive
    dict set st queue_depth [llength [glob -nocomplain -directory [file join $dir queue] cmd_*.json]]
    return $st
}

proc ::skillpilot::lease {dir ttl_ms {lease_id tcl-lease}} {
    variable leaseCounter
    variable version
    set dir [check $dir]
    incr leaseCounter
    set exp [expr {[clock milliseconds] + $ttl_ms}]
    write_atomic [file join $dir state lease.json] \
        "\{\"protocol_version\":$version,\"lease_id\":[json_str $lease_id],\"ttl_ms\":$ttl_ms,\"counter\":$leaseCounter,\"expires_at\":$exp,\"owner\":[json_str tcl-master@[info hostname]:[pid]]\}"
}
