# A stand-in for the runner's side of the files, for tcltest unit tests of
# the Tcl master's logic (the conformance suite runs it against the real
# runner): state.json, a heartbeat, and a mailbox that answers requests.
#
#   tclsh fake_runner.tcl DIR INTERVAL_MS OUTCOME ?STAYS?
#
# Every request gets OUTCOME (a stop that is accepted stops the fake,
# unless STAYS is 1; with STAYS hang it goes on but stops beating, a runner
# that dies without saying so). Touching DIR/fake-hang stops the heartbeat; the
# content of DIR/fake-phase, when it exists at start, is the phase. While
# DIR/fake-serve exists, every queued command gets a result at once whose
# status is that file's content (ok, error, timeout or cancelled).
lassign $argv dir interval outcome stays
if {$stays eq ""} { set stays 0 }
set counter 0
set phase idle
if {[file exists [file join $dir fake-phase]]} {
    set f [open [file join $dir fake-phase]]
    set phase [string trim [read $f]]
    close $f
}
set sid session_fake_[pid]

proc put {path text} {
    set tmp $path.[pid].tmp
    set f [open $tmp w]
    puts -nonewline $f $text
    close $f
    file rename -force $tmp $path
}
proc state {} {
    global dir phase sid
    put [file join $dir state state.json] "{\"protocol_version\":1,\"phase\":\"$phase\",\"reason\":\"init failed: boom\",\"session_id\":\"$sid\",\"kind\":\"tcl\",\"runner_pid\":[pid],\"current_cmd_id\":null}"
}
proc beat {} {
    global dir counter interval phase sid
    if {![file exists [file join $dir fake-hang]]} {
        incr counter
        put [file join $dir state heartbeat.json] "{\"counter\":$counter,\"interval_ms\":$interval,\"phase\":\"$phase\",\"session_id\":\"$sid\"}"
    }
    after $interval beat
}
proc mailbox {} {
    global dir outcome stays phase
    foreach p [lsort [glob -nocomplain -directory [file join $dir ctl] req_*.json]] {
        set f [open $p]
        set req [read $f]
        close $f
        regexp {"op":"([a-z]+)"} $req -> op
        regexp {"req_id":"([^"]+)"} $req -> id
        # Deleted before the reply is written. The runner does the opposite
        # (PROTOCOL.md 9.1, step 4: reply, then delete); this order lets a
        # test look at ctl/ as soon as the master has returned.
        file delete $p
        put [file join $dir ctl ack [file tail $p]] "{\"req_id\":\"$id\",\"op\":\"$op\",\"outcome\":\"$outcome\",\"message\":\"fake\",\"request\":[string map {\n { }} $req]}"
        if {$op eq "stop" && $stays eq "hang"} {
            close [open [file join $dir fake-hang] w]
        }
        if {$op eq "stop" && $outcome eq "accepted" && $stays eq "0"} {
            set phase stopped
            state
            beat
            exit 0
        }
    }
    serve
    after 10 mailbox
}
proc serve {} {
    global dir
    set f [file join $dir fake-serve]
    if {![file exists $f]} { return }
    set c [open $f]
    set status [string trim [read $c]]
    close $c
    foreach p [lsort [glob -nocomplain -directory [file join $dir queue] cmd_*.json]] {
        set name [file tail $p]
        regexp {^cmd_[0-9]+_(.*)\.json$} $name -> id
        set err [expr {$status eq "ok" ? "" : ",\"error\":{\"code\":\"fake\",\"message\":\"fake $status\"}"}]
        put [file join $dir result $name] "{\"protocol_version\":1,\"cmd_id\":\"$id\",\"status\":\"$status\",\"value\":\"v\"$err}"
        file delete $p
    }
}
state
beat
mailbox
vwait forever
