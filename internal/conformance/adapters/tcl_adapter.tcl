# Conformance adapter for the Tcl master (see internal/conformance/doc.go).
#
# Reads one step per line on stdin ("op key=value ..."; *_b64 values are
# base64) and prints one JSON outcome per line. The session directory is
# argv 0. Stdin is read from the event loop, so that keeplease renewals run
# between steps as they would in an idle EDA tool.
package require skillpilot

set dir [lindex $argv 0]
# A pool scenario's session is POOL/s00; pool_submit's replies by cmd_id.
set pool [file dirname [file normalize $dir]]
array set where {}

proc b64 {bytes} { return [binary encode base64 $bytes] }
proc text {step key} { return [encoding convertfrom utf-8 [binary decode base64 [dict get $step ${key}_b64]]] }
proc opt {step key default} {
    if {[dict exists $step $key]} { return [dict get $step $key] } ;# As given: expr would read NaN, 0x10 as numbers.
    return $default
}
proc jstr {s} { return [skillpilot::json::string $s] }

proc ofResult {r} {
    global dir
    set st [dict get $r status]
    set v [dict get $r value]
    set value [expr {[dict exists $r value] && $v ne "" ? [jstr $v] : "null"}]
    set out [encoding convertto utf-8 [skillpilot::output $dir $r]]
    set ctx ""
    if {$st ne "ok"} {
        # The context of the error the master raises for it (wait -check 1).
        catch {apply {{r} {skillpilot::ResultError $r}} $r} - opts
        set ctx ",\"context\":[toJSON [dict get $opts -context]]"
    }
    return "{\"outcome\":[jstr $st],\"exit\":[dict get {ok 0 error 1 timeout 3 cancelled 4} $st],\"cmd_id\":[jstr [dict get $r cmd_id]],\"value\":$value,\"error_message\":[jstr [dict get $r error_message]],\"output_b64\":\"[b64 $out]\"$ctx}"
}

proc ofError {msg ec {ctx {}}} {
    if {[lindex $ec 0] ne "SKILLPILOT"} {
        return "{\"outcome\":\"io_error\",\"exit\":10,\"message\":[jstr $msg]}"
    }
    set code [lindex $ec 1]
    if {$code in {COMMAND_FAILED COMMAND_TIMEOUT CANCELLED}} { return [ofResult [lindex $ec 2]] }
    set out "{\"outcome\":[jstr [string tolower $code]],\"exit\":[skillpilot::exitcode $ec],\"message\":[jstr $msg]"
    if {[dict size $ctx]} { append out ",\"context\":[toJSON $ctx]" }
    if {$code in {WAIT_TIMEOUT RUNNER_NOT_ALIVE} && [llength $ec] > 2 && [string is integer -strict [lindex $ec 2]]} {
        append out ",\"resume_cursor\":[lindex $ec 2],\"reply\":{\"resume_cursor\":[lindex $ec 2]}"
    }
    set reply [lindex $ec 2]
    if {[llength $ec] > 2 && [string is list $reply] && [llength $reply] % 2 == 0 && [dict exists $reply cmd_state]} {
        append out ",\"cmd_state\":[jstr [dict get $reply cmd_state]]"
    }
    return "$out}"
}

# cursorFields is {"resume_cursor":N} of a submit or status reply dict, {}
# when it has none.
proc cursorFields {d} {
    if {![dict exists $d resume_cursor]} { return "{}" }
    return "{\"resume_cursor\":[dict get $d resume_cursor]}"
}

# toJSON writes a waitfor reply dict with its own keys (matched a boolean,
# match_span an object, integers as numbers, the rest strings).
# (bytes 1: the strings are bytes, as a waitfor's match_text is).
proc toJSON {d {bytes 0}} {
    set parts {}
    dict for {k v} $d {
        if {$k eq "match_span"} {
            set v [toJSON $v]
        } elseif {$k eq "matched"} {
            set v [expr {$v ? "true" : "false"}]
        } elseif {![string is wideinteger -strict $v]} {
            set v [jstr [expr {$bytes ? [encoding convertfrom utf-8 $v] : $v}]]
        }
        lappend parts "[jstr $k]:$v"
    }
    return "{[join $parts ,]}"
}

# ofReply is the outcome of a delivered send, signal or resize.
proc ofReply {reply} {
    set out "{\"outcome\":[jstr [dict get $reply outcome]],\"exit\":0"
    foreach k {bytes match_start match_end} {
        if {[dict exists $reply $k]} { append out ",\"$k\":[dict get $reply $k]" }
    }
    return "$out}"
}

# labels: the step's labels (k=v,k2=v2) as a dict.
proc labels {step} {
    set l {}
    foreach kv [split [dict get $step labels] ,] {
        set eq [string first = $kv]
        dict set l [string range $kv 0 $eq-1] [string range $kv $eq+1 end]
    }
    return $l
}

# commandOpts: the step's command options, the same for submit, run and
# pool_submit (one table: skillpilot::submitOptions); raw values
# (timeout_s, max_output_bytes) as they are.
proc commandOpts {step} {
    set sub {}
    if {[dict exists $step id]} { lappend sub -cmd_id [dict get $step id] }
    if {[dict exists $step timeout_ms]} { lappend sub -timeout [expr {[dict get $step timeout_ms] / 1000.0}] }
    foreach {k opt} {timeout_s -timeout trace_id -trace_id max_output_bytes -max_output_bytes cancel_policy -cancel_policy} {
        if {[dict exists $step $k]} { lappend sub $opt [dict get $step $k] }
    }
    if {[dict exists $step labels]} { lappend sub -labels [labels $step] }
    return $sub
}

proc waitOpts {step} {
    set o [list -timeout [opt $step wait_timeout_ms -1]]
    if {[dict exists $step wait_for_runner_ms]} { lappend o -waitforrunner [dict get $step wait_for_runner_ms] }
    return $o
}

proc do {step} {
    global dir
    set op [dict get $step op]
    switch -- $op {
        submit - run {
            set sub [commandOpts $step]
            if {$op eq "run"} {
                # skillpilot::run itself: a status other than ok raises, the result in the error code (ofError).
                set w [waitOpts $step]
                lset w 0 -waittimeout
                return [ofResult [skillpilot::run $dir [text $step payload] {*}$sub {*}$w]]
            }
            set r [skillpilot::submit $dir [text $step payload] {*}$sub -reply 1]
            return "{\"outcome\":\"queued\",\"exit\":0,\"cmd_id\":[jstr [dict get $r cmd_id]],\"reply\":[cursorFields $r]}"
        }
        pool_submit {
            global pool where
            set sub [commandOpts $step]
            if {[dict exists $step affinity]} { lappend sub -affinity [dict get $step affinity] }
            set w [skillpilot::pool_submit $pool [text $step payload] {*}$sub]
            set where([dict get $w cmd_id]) $w
            return "{\"outcome\":\"queued\",\"exit\":0,\"cmd_id\":[jstr [dict get $w cmd_id]],\"session\":[jstr [dict get $w session]]}"
        }
        pool_wait {
            global pool where
            return [ofResult [skillpilot::pool_wait $pool $where([dict get $step id]) [opt $step wait_timeout_ms -1]]]
        }
        wait { return [ofResult [skillpilot::wait $dir [dict get $step id] -check 0 {*}[waitOpts $step]]] }
        cancel {
            set reply [skillpilot::cancel $dir [opt $step id ""] {*}[waitOpts $step]]
            return "{\"outcome\":[jstr [dict get $reply outcome]],\"exit\":0}"
        }
        stop {
            set reply [skillpilot::stop $dir -force [opt $step force 0] -wait [opt $step wait 0] {*}[waitOpts $step]]
            return "{\"outcome\":[jstr [dict get $reply outcome]],\"exit\":0}"
        }
        status {
            set st [skillpilot::status $dir]
            set ok [dict get $st can_serve]
            set outcome [expr {$ok ? "ok" : [dict get $st alive] ? "cannot_serve" : "not_alive"}]
            return "{\"outcome\":\"$outcome\",\"exit\":[expr {$ok ? 0 : 5}],\"alive\":[expr {[dict get $st alive] ? "true" : "false"}],\"phase\":[jstr [dict get $st phase]],\"can_serve\":[expr {$ok ? "true" : "false"}],\"reply\":[cursorFields $st]}"
        }
        lease {
            set ttl [opt $step ttl [opt $step ttl_ms ""]]
            if {[opt $step keep 0]} {
                skillpilot::keeplease $dir $ttl
            } else {
                skillpilot::lease $dir $ttl
            }
            return {{"outcome":"ok","exit":0}}
        }
        lease_stop {
            skillpilot::keeplease $dir 0
            return {{"outcome":"ok","exit":0}}
        }
        waitfor {
            set m [skillpilot::waitfor $dir [text $step re] -from [opt $step from 0] {*}[waitOpts $step]]
            return "{\"outcome\":\"matched\",\"exit\":0,\"start\":[dict get $m match_span start],\"end\":[dict get $m match_span end],\"resume_cursor\":[dict get $m resume_cursor],\"match_b64\":\"[b64 [dict get $m match_text]]\",\"reply\":[toJSON $m 1]}"
        }
        send {
            set data [text $step text]
            if {[opt $step no_newline 0] ne "1"} { append data \n }
            set o [waitOpts $step]
            if {[dict exists $step expect_b64]} { lappend o -expect [text $step expect] }
            if {[dict exists $step expect_timeout_ms]} { lappend o -expecttimeout [dict get $step expect_timeout_ms] }
            if {[dict exists $step expect_timeout]} { lappend o -expecttimeout [dict get $step expect_timeout] }
            lappend o -secret [opt $step secret 0]
            return [ofReply [skillpilot::send $dir [dict get $step id] $data {*}$o]]
        }
        signal { return [ofReply [skillpilot::signal $dir [dict get $step id] [dict get $step sig] {*}[waitOpts $step]]] }
        resize { return [ofReply [skillpilot::resize $dir [dict get $step cols] [dict get $step rows] {*}[waitOpts $step]]] }
        output {
            set length [opt $step length -1]
            if {$length == 0} { set length -1 }
            set data [skillpilot::output $dir [dict get $step id] [opt $step offset 0] $length]
            return "{\"outcome\":\"ok\",\"exit\":0,\"output_b64\":\"[b64 [encoding convertto utf-8 $data]]\"}"
        }
        withdraw {
            set r [skillpilot::withdraw $dir [dict get $step id]]
            # A command file's name names its cmd_id (cmd_<seq>_<id>.json).
            set want [lindex [split [dict get $step id] /] end]
            regexp {^cmd_[0-9]+_(.*)\.json$} $want -> want
            if {![dict exists $r withdrawn] || [dict get $r withdrawn] != 1 || [dict get $r cmd_id] ne $want
                || ![dict exists $r name]} {
                return "{\"outcome\":\"bad_reply\",\"exit\":1}"
            }
            return {{"outcome":"withdrawn","exit":0}}
        }
        ready {
            set o [list -timeout [opt $step wait_timeout_ms 60000]]
            if {[dict exists $step wait_for_runner_ms]} { lappend o -waitforrunner [dict get $step wait_for_runner_ms] }
            skillpilot::ready $dir {*}$o
            return {{"outcome":"ready","exit":0}}
        }
    }
    return "{\"outcome\":\"usage\",\"exit\":2,\"message\":[jstr "unknown op $op"]}"
}

proc onLine {} {
    if {[gets stdin line] < 0} {
        if {[eof stdin]} { set ::done 1 }
        return
    }
    set words [split [string trim $line] " "]
    if {[llength $words] == 0 || [lindex $words 0] eq ""} { return }
    if {[lindex $words 0] eq "quit"} { set ::done 1; return }
    set step [dict create op [lindex $words 0]]
    foreach w [lrange $words 1 end] {
        set i [string first = $w]
        dict set step [string range $w 0 [expr {$i - 1}]] [string range $w [expr {$i + 1}] end]
    }
    if {[catch {do $step} out opts]} {
        set out [ofError $out [dict get $opts -errorcode] [expr {[dict exists $opts -context] ? [dict get $opts -context] : {}}]]
    }
    puts $out
    flush stdout
}

fconfigure stdout -encoding utf-8 -translation lf
fconfigure stdin -blocking 0
fileevent stdin readable onLine
vwait ::done
