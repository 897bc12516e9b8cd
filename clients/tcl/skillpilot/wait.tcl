# Waiting in the SkillPilot Tcl master: adaptive polling, liveness (PROTOCOL.md
# section 8, the same rule as the Go and Python masters), lease renewal.
#
# The runner is dead at once when its phase is "stopped" or, on a local
# filesystem only, when its flock is free; otherwise it is alive while its
# heartbeat counter moves within 2 x interval_ms + 250 ms of this host's
# clock. A counter that stands still longer is late, not dead: every
# request and every wait fails with RUNNER_NOT_ALIVE only once no live
# runner has been seen for the grace (Grace: -waitforrunner ms; 0, the
# default, means 10 s or ten heartbeat intervals, whichever is longer).
# A runner that stopped on purpose (phase stopped and, on a local
# filesystem, its lock free) does not come back by itself: a wait for a
# result, output or a reply ends after StoppedGraceMs then (as
# the Go master); ready, how a caller waits for a runner to be started
# again, keeps the whole grace.

namespace eval ::skillpilot {
    # StoppedGraceMs replaces the grace when the runner stopped on purpose
    # (the Go master's stoppedGrace): the second lets a runner being
    # started on the session right now write its state first.
    variable StoppedGraceMs 1000
}

# Interval is the heartbeat's interval in ms (1000 when not known), at
# least 100.
proc ::skillpilot::Interval {hb} {
    set iv 1000
    if {[dict exists $hb interval_ms] && [string is double -strict [dict get $hb interval_ms]] &&
        [dict get $hb interval_ms] > 0} {
        set iv [dict get $hb interval_ms]
    }
    return [expr {int(max($iv, 100))}]
}

proc ::skillpilot::Window {hb} {
    return [expr {2 * [Interval $hb] + 250}]
}

# Grace is the one grace of requests and waits (PROTOCOL.md section 8,
# "Giving up"), as the Go master's Grace: base_ms (<= 0: 10 s or ten
# heartbeat intervals, whichever is longer), never under one liveness
# window of a heartbeat of interval_ms.
proc ::skillpilot::Grace {base_ms interval_ms} {
    set interval_ms [expr {max($interval_ms, 100)}]
    if {$base_ms <= 0} { set base_ms [expr {max(10000, 10 * $interval_ms)}] }
    return [expr {max($base_ms, 2 * $interval_ms + 250)}]
}

proc ::skillpilot::StoppedReason {st} {
    set why [expr {[dict exists $st reason] ? [dict get $st reason] : ""}]
    if {[dict exists $st error message] && [string first [dict get $st error message] $why] < 0} {
        set why [expr {$why eq "" ? "" : "$why: "}][dict get $st error message]
    }
    return "the runner stopped[expr {$why eq "" ? "" : " ($why)"}]"
}

proc ::skillpilot::Phase {d} {
    return [expr {[dict exists $d phase] ? [dict get $d phase] : ""}]
}

# Observe takes one look at the runner of dir, as the Go master's observe
# does, and returns a dict: alive (the counter was seen moving within the
# window), definite (when not alive: dead for certain), late (when not
# alive: the counter has not moved for more than the window; only the
# grace of a request or wait decides), stopped (when not alive: the runner
# stopped on purpose, phase stopped and, on a local filesystem, its lock
# free; on NFS state.json alone), reason, state (state.json), interval (the
# heartbeat's, ms). Dead at once: no state, phase stopped, or on a local
# filesystem a free flock.
proc ::skillpilot::Observe {dir} {
    variable hbSeen
    fs::revalidate $dir state
    set st [read_json $dir state state.json 1]
    set hb [read_json $dir state heartbeat.json 1]
    set look [dict create alive 0 definite 1 late 0 stopped 0 reason "" state $st interval [Interval $hb]]
    if {$st eq "" && $hb eq ""} { return [dict replace $look reason "no runner has written state yet"] }
    if {[Phase $st] eq "stopped" || [Phase $hb] eq "stopped"} {
        set onPurpose [expr {[Network $dir] || [fs::lock_held $dir state runner.lock] == 0}]
        return [dict replace $look reason [StoppedReason $st] stopped $onPurpose]
    }
    if {![Network $dir] && [fs::lock_held $dir state runner.lock] == 0} {
        return [dict replace $look reason "the runner's lock is free"]
    }
    if {$hb eq ""} { return [dict replace $look definite 0 reason "no heartbeat yet"] }
    # The runner's session_id with the counter: a new runner counts from the
    # start again and may reach the number the previous one stopped at.
    set c [list [expr {[dict exists $hb session_id] ? [dict get $hb session_id] : ""}] \
               [expr {[dict exists $hb counter] ? [dict get $hb counter] : ""}]]
    set now [::tcl::clock::milliseconds]
    if {![info exists hbSeen($dir)] || [lindex $hbSeen($dir) 0] ne $c} {
        set hbSeen($dir) [list $c $now [info exists hbSeen($dir)]]
    }
    lassign $hbSeen($dir) -> at moved
    set age [expr {$now - $at}]
    set window [Window $hb]
    if {$moved && $age <= $window} { return [dict replace $look alive 1 definite 0 reason "heartbeat counter moved"] }
    if {$age > $window} {
        return [dict replace $look definite 0 late 1 \
                    reason "heartbeat counter has not moved for [format %.1f [expr {$age / 1000.0}]]s"]
    }
    return [dict replace $look definite 0 reason "heartbeat counter not seen moving yet"]
}

# Alive judges liveness as the Go master's Status does: looks every 50 ms
# until one decides (at most one window; 10 s for a heartbeat that claims a
# huge interval). A status is a snapshot: a late counter reads as not
# alive. Returns {0|1 reason}.
proc ::skillpilot::Alive {dir} {
    set look [Observe $dir]
    set end [expr {[::tcl::clock::milliseconds] + 10000}]
    while {![dict get $look alive] && ![dict get $look definite] && ![dict get $look late]} {
        if {[::tcl::clock::milliseconds] >= $end} { return {0 "heartbeat counter did not move"} }
        after 50
        set look [Observe $dir]
    }
    return [list [dict get $look alive] [dict get $look reason]]
}

# AwaitAlive is the check a request makes before it writes anything (the
# Go master's awaitAlive): looks every 100 ms until the runner is seen
# alive and returns that look. A definite sign of death raises
# RUNNER_NOT_ALIVE at once; a late heartbeat does not: it raises only once
# no live runner has been seen for the grace, the rule of every wait.
proc ::skillpilot::AwaitAlive {dir grace_ms} {
    set start [::tcl::clock::milliseconds]
    while 1 {
        set look [Observe $dir]
        if {[dict get $look alive]} { return $look }
        if {[dict get $look definite]} {
            ThrowCtx RUNNER_NOT_ALIVE "runner not alive: [dict get $look reason]; nothing was written" \
                [dict create reason [dict get $look reason] grace_ms [Grace $grace_ms [dict get $look interval]]]
        }
        set gone [expr {[::tcl::clock::milliseconds] - $start}]
        if {$gone > [set grace [Grace $grace_ms [dict get $look interval]]]} {
            ThrowCtx RUNNER_NOT_ALIVE "runner not alive: [dict get $look reason]; no live runner seen for\
                [format %.1f [expr {$gone / 1000.0}]]s (raise with -waitforrunner); nothing was written" \
                [dict create reason [dict get $look reason] grace_ms $grace]
        }
        RenewLeases
        after 100 ;# PROTOCOL.md 19.1: liveness looked at no more often than every 100 ms.
    }
}

# WaitStart returns the state of one wait; WaitStep sleeps once (1 ms for
# the first four looks, then doubling to pollMs: Tcl's after counts whole
# milliseconds, so a ~1 ms command is seen at the second look rather than
# the third), after checking the caller's deadline and the runner's
# liveness and renewing kept leases. stoppedEnds 0 (ready): a runner that
# stopped on purpose does not end the wait before the grace.
proc ::skillpilot::WaitStart {dir timeout_ms grace_ms {learn 0} {stoppedEnds 1}} {
    variable waitForRunnerMs
    variable spinUs
    if {![string is double -strict $timeout_ms] || ![string is double -strict $grace_ms]} {
        Throw USAGE "timeouts are numbers of milliseconds"
    }
    if {$grace_ms <= 0} { set grace_ms $waitForRunnerMs }
    set now [::tcl::clock::milliseconds]
    set first_grace [Grace $grace_ms 0]
    # The first look at the runner comes 20 ms after the start (a look
    # parses two JSON files): a look cannot end a wait before the grace has
    # passed, so a short command's wait never pays for one.
    set first [expr {$now + int(min(20, $first_grace / 2))}]
    # Adaptive first polls (a wait for a result, learn 1): when the last
    # short ones on this session took about E, sleep (whole ms, no CPU
    # taken from the runner) until 1 ms before E, then look again at once
    # for 2 ms.
    set us [::tcl::clock::microseconds]
    set sleepUntil $us
    set spinUntil [expr {$us + $spinUs}]
    set e [expr {$learn ? [ExpectedUs $dir] : 0}]
    if {$e > 0} {
        set sleepUntil [expr {$us + min(max(0, $e - 1000), 4000)}]
        set spinUntil [expr {max($spinUntil, $sleepUntil + 2000)}]
    }
    return [dict create dir $dir timeout $timeout_ms deadline [expr {$timeout_ms < 0 ? -1 : $now + $timeout_ms}] \
                grace $grace_ms lastAlive $now nextLook $first delay 1 steps 0 stoppedEnds $stoppedEnds \
                startUs $us sleepUntil $sleepUntil spinUntil $spinUntil \
                look [dict create alive 0 definite 0 stopped 0 reason "no look yet" state {}]]
}

# ExpectedUs is how long a short wait on dir is expected to take (µs): the
# smaller of the last two that took under 20 ms, or 0 when unknown.
proc ::skillpilot::ExpectedUs {dir} {
    variable adaptive
    variable waitSeen
    if {!$adaptive || ![info exists waitSeen($dir)] || [llength $waitSeen($dir)] < 2} { return 0 }
    return [tcl::mathfunc::min {*}$waitSeen($dir)]
}

# WaitDone records how long a wait that saw its answer took.
proc ::skillpilot::WaitDone {wVar} {
    variable waitSeen
    upvar 1 $wVar w
    set took [expr {[::tcl::clock::microseconds] - [dict get $w startUs]}]
    set dir [dict get $w dir]
    if {$took < 20000} {
        set l [expr {[info exists waitSeen($dir)] ? $waitSeen($dir) : {}}]
        set waitSeen($dir) [lrange [linsert $l 0 $took] 0 1]
    } else {
        unset -nocomplain waitSeen($dir)
    }
}

proc ::skillpilot::WaitStep {wVar what} {
    variable pollMs
    variable StoppedGraceMs
    upvar 1 $wVar w
    set now [::tcl::clock::milliseconds]
    set deadline [dict get $w deadline]
    if {$deadline >= 0 && $now >= $deadline} {
        Throw WAIT_TIMEOUT "$what within [dict get $w timeout] ms"
    }
    if {$now >= [dict get $w nextLook]} {
        # Every 250 ms: a look parses two JSON files in Tcl (about 0.35 ms).
        dict set w nextLook [expr {$now + 250}]
        set look [Observe [dict get $w dir]]
        dict set w look $look
        set gone [expr {$now - [dict get $w lastAlive]}]
        if {[dict get $look alive]} {
            dict set w lastAlive $now
        } elseif {[dict get $w stoppedEnds] && [dict get $look stopped] &&
                  $gone >= min($StoppedGraceMs, [set grace [Grace [dict get $w grace] [dict get $look interval]]])} {
            ThrowCtx RUNNER_NOT_ALIVE "runner not alive: [dict get $look reason]" \
                [dict create reason [dict get $look reason] grace_ms $grace]
        } elseif {$now - [dict get $w lastAlive] > [set grace [Grace [dict get $w grace] [dict get $look interval]]]} {
            ThrowCtx RUNNER_NOT_ALIVE "runner not alive: [dict get $look reason]; no live runner seen for\
                [format %.1f [expr {($now - [dict get $w lastAlive]) / 1000.0}]]s (raise with -waitforrunner)" \
                [dict create reason [dict get $look reason] grace_ms $grace]
        }
    }
    RenewLeases
    set us [::tcl::clock::microseconds]
    if {$us + 1000 <= [dict get $w sleepUntil]} {
        set d [expr {([dict get $w sleepUntil] - $us) / 1000}]
        if {$deadline >= 0} { set d [expr {max(0, min($d, $deadline - $now))}] }
        after [expr {int($d)}]
        return
    }
    if {$us < [dict get $w spinUntil]} {
        return ;# Look again at once (after sleeps whole ms).
    }
    set d [dict get $w delay]
    if {$deadline >= 0} { set d [expr {max(0, min($d, $deadline - $now))}] }
    after [expr {int($d)}]
    if {[dict incr w steps] >= 4} {
        dict set w delay [expr {min([dict get $w delay] * 2, $pollMs)}]
    }
}

# --- lease --------------------------------------------------------------------

# lease writes state/lease.json once: the runner stops when it has seen no
# renewal for ttl_ms on its own clock. It returns what it wrote, as a dict
# (the Go CLI's lease --json reply, Python's write_lease).
proc ::skillpilot::lease {dir ttl_ms {lease_id tcl-lease}} {
    variable leaseCounter
    variable version
    set dir [check $dir]
    set ttl_ms [json::number ttl_ms $ttl_ms integer 1]
    incr leaseCounter
    set exp [expr {[::tcl::clock::milliseconds] + $ttl_ms}]
    # RFC 3339, as the Go and Python masters write it.
    set exp [format %s.%03dZ [clock format [expr {$exp / 1000}] -format %Y-%m-%dT%H:%M:%S -gmt 1] [expr {$exp % 1000}]]
    fs::write_atomic $dir state lease.json "\{\"protocol_version\":$version,\"lease_id\":[json::string $lease_id],\
\"ttl_ms\":$ttl_ms,\"counter\":$leaseCounter,\"expires_at\":[json::string $exp],\"owner\":[json::string [Owner]]\}"
    return [dict create protocol_version $version lease_id $lease_id ttl_ms $ttl_ms counter $leaseCounter \
                expires_at $exp owner [Owner]]
}

# keeplease writes the lease and keeps renewing it every ttl_ms/3: inside
# every skillpilot wait, and from the event loop whenever it runs (after).
# Tcl has no thread the work cannot block: a long command of the host
# application that is not a skillpilot wait delays renewals, so choose
# ttl_ms longer than such pauses. "keeplease dir 0" stops. A renewal that
# fails is reported on stderr and kept: see lease_error.
proc ::skillpilot::keeplease {dir ttl_ms {lease_id ""}} {
    variable leases
    set dir [check $dir]
    set ttl_ms [json::number ttl_ms $ttl_ms integer 0]
    if {$ttl_ms == 0} {
        array unset leases $dir
        return
    }
    if {$lease_id eq ""} { set lease_id lease-[new_id] }
    lease $dir $ttl_ms $lease_id
    set leases($dir) [list $ttl_ms $lease_id [expr {[::tcl::clock::milliseconds] + $ttl_ms / 3}] ""]
    after [expr {max(1, $ttl_ms / 3)}] ::skillpilot::LeaseTimer
    return $lease_id
}

proc ::skillpilot::lease_error {dir} {
    variable leases
    set dir [file normalize $dir]
    return [expr {[info exists leases($dir)] ? [lindex $leases($dir) 3] : ""}]
}

proc ::skillpilot::LeaseTimer {} {
    variable leases
    RenewLeases
    set next ""
    foreach dir [array names leases] {
        set due [expr {[lindex $leases($dir) 2] - [::tcl::clock::milliseconds]}]
        if {$next eq "" || $due < $next} { set next $due }
    }
    if {$next ne ""} { after [expr {max(1, $next)}] ::skillpilot::LeaseTimer }
}

proc ::skillpilot::RenewLeases {} {
    variable leases
    set now [::tcl::clock::milliseconds]
    foreach dir [array names leases] {
        lassign $leases($dir) ttl id due err
        if {$now < $due} { continue }
        if {[catch {lease $dir $ttl $id} msg]} {
            set err $msg
            puts stderr "skillpilot: renew lease: $msg"
        }
        set leases($dir) [list $ttl $id [expr {$now + $ttl / 3}] $err]
    }
}
