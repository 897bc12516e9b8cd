# ---- stand-in runtime (static part; the recordings follow) ----
namespace eval ::sp_standin {
    variable P [dict create] ;# payload text -> payload index
    variable R               ;# payload index -> list of recordings, in recorded order
    array set R {}
    variable pos             ;# payload index -> how many times it was answered in this session
    array set pos {}
    variable posFile ""
}

# payload registers the text of payload i (base64 of its UTF-8 bytes).
proc ::sp_standin::payload {i b64} {
    variable P
    dict set P [encoding convertfrom utf-8 [binary decode base64 $b64]] $i
}

# rec appends a recording of payload i:
#   action: return (rc, value) | exit (code) | kill (signal) | hang (until interrupted)
proc ::sp_standin::rec {i action rc value outEnc out ms arg} {
    variable R
    lappend R($i) [list $action $rc $value $outEnc $out $ms $arg]
}

# loadPositions reads how often each payload was already answered in this
# session, so that a restarted tool (plain tclsh dies of a Ctrl-C; init
# reruns) goes on where it was instead of replaying from the start.
proc ::sp_standin::loadPositions {} {
    variable posFile
    variable pos
    variable id
    if {![info exists ::env(SP_SESSION_DIR)] || $::env(SP_SESSION_DIR) eq ""} {
        puts "stand-in: SP_SESSION_DIR is not set: replay positions live in memory only and restart from the beginning if the tool restarts"
        return
    }
    set posFile [file join $::env(SP_SESSION_DIR) log "standin-$id.positions"]
    if {[catch {file type $posFile} type]} {
        return ;# none yet
    }
    if {$type ne "file" || [file size $posFile] > 268435456} {
        error "stand-in: $posFile is not a regular file of a sane size; refusing to use it"
    }
    set fh [open $posFile r]
    set lines [split [read $fh] \n]
    close $fh
    set n 0
    foreach line $lines {
        if {[scan $line "%d %d%n" p k len] == 3 && $len == [string length $line]} {
            if {![info exists pos($p)] || $pos($p) < $k + 1} {
                set pos($p) [expr {$k + 1}]
            }
            incr n
        }
    }
    puts "stand-in: resumed after $n answered commands ($posFile)"
}

# take returns the position of the next answer for payload p and records it
# (appending "p k" to the positions file) before the answer is given, so a
# command that kills the tool still counts as answered.
proc ::sp_standin::take {p} {
    variable pos
    variable posFile
    set k 0
    if {[info exists pos($p)]} {
        set k $pos($p)
    }
    set pos($p) [expr {$k + 1}]
    if {$posFile ne ""} {
        if {![catch {file type $posFile} type] && $type ne "file"} {
            error "stand-in: $posFile is not a regular file; refusing to write it"
        }
        set fh [open $posFile {WRONLY APPEND CREAT}]
        puts $fh "$p $k"
        close $fh
    }
    return $k
}

# substitute returns the script the runner's helper evaluates instead of
# the payload: a replay of its next recording, the not-recorded error, or
# "" to evaluate the payload itself (--on-unknown tcl).
proc ::sp_standin::substitute {script} {
    variable P
    variable onUnknown
    if {[dict exists $P $script]} {
        set p [dict get $P $script]
        return "::sp_standin::replay $p [take $p]"
    }
    if {$onUnknown eq "tcl"} {
        return ""
    }
    return [list ::sp_standin::notRecorded [binary encode base64 [encoding convertto utf-8 $script]]]
}

proc ::sp_standin::notRecorded {b64} {
    set script [string trim [encoding convertfrom utf-8 [binary decode base64 $b64]]]
    set head [lindex [split $script \n] 0]
    if {[string length $head] > 200} {
        set head "[string range $head 0 199]…"
    }
    return -code error -errorcode {SKILLPILOT STANDIN NOT_RECORDED} \
        "stand-in: command not recorded: $head (it is not in the sessions this stand-in was made from; record it, or generate the stand-in with --on-unknown tcl)"
}

# pause sleeps the recorded time of a command, as --timing says.
proc ::sp_standin::pause {ms} {
    variable scale
    if {$scale > 0 && $ms > 0} {
        after [expr {int(round($ms * $scale))}]
    }
}

# replay prints the recorded output bytes exactly and ends the way the
# recorded command ended.
proc ::sp_standin::replay {p k} {
    variable R
    set recs $R($p)
    lassign [lindex $recs [expr {min($k, [llength $recs] - 1)}]] action rc value outEnc out ms arg
    if {$out ne ""} {
        set bytes [binary decode base64 $out]
        if {$outEnc eq "zlib"} {
            set bytes [zlib decompress $bytes]
        }
        set enc [fconfigure stdout -encoding]
        set tr [fconfigure stdout -translation]
        fconfigure stdout -encoding binary -translation lf
        puts -nonewline stdout $bytes
        flush stdout
        fconfigure stdout -encoding $enc -translation $tr
    }
    switch -- $action {
        return {
            pause $ms
            return -code $rc [encoding convertfrom utf-8 [binary decode base64 $value]]
        }
        exit {
            pause $ms
            exit $arg
        }
        kill {
            pause $ms
            exec kill -s $arg [pid]
        }
    }
    # hang: the recorded command never finished by itself (it was cancelled,
    # timed out, or its runner died): wait to be interrupted the same way.
    while 1 {
        after 3600000
    }
}

# install wraps the runner's payload helpers so that every payload passes
# through substitute. It is idempotent within one interpreter.
proc ::sp_standin::install {} {
    if {[info commands ::sp_standin::origSrc] ne ""} {
        return
    }
    if {[info commands ::__sp::src] eq "" || [info commands ::__sp::ev] eq ""} {
        error "stand-in: the SkillPilot runner's helpers are missing: load this file with `runner --init FILE -- tclsh`"
    }
    rename ::__sp::src ::sp_standin::origSrc
    rename ::__sp::ev ::sp_standin::origEv
    proc ::__sp::src {f args} {
        set fh [open $f rb]
        set script [encoding convertfrom utf-8 [read $fh]]
        close $fh
        set sub [::sp_standin::substitute $script]
        if {$sub eq ""} {
            tailcall ::sp_standin::origSrc $f {*}$args
        }
        tailcall ::sp_standin::origEv [binary encode base64 [encoding convertto utf-8 $sub]] {*}$args
    }
    proc ::__sp::ev {b args} {
        set sub [::sp_standin::substitute [encoding convertfrom utf-8 [binary decode base64 $b]]]
        if {$sub eq ""} {
            tailcall ::sp_standin::origEv $b {*}$args
        }
        tailcall ::sp_standin::origEv [binary encode base64 [encoding convertto utf-8 $sub]] {*}$args
    }
}
