#!/usr/bin/env tclsh
# wrapped.tcl: a Tcl shell that redefines what the commercial EDA shells
# redefine, so that the tests hold the runner to never relying on Tcl's own
# source, puts or unknown being there:
#
#  - source takes -echo and -verbose and returns nothing, and goes on after
#    an error (OpenSTA 2.0.17's source, a proc over source_; the Synopsys
#    shells document "source [-echo] [-verbose] file", Cadence's Innovus
#    and Genus the same options);
#  - puts also writes every line to a log file, as flows tee their output
#    with a redefined puts (the file is $env(WRAPPED_LOG), else
#    wrapped.log in the working directory);
#  - unknown answers "Error: unknown command 'x' (CMD-005)", the Synopsys
#    shells' message, and never runs a program;
#  - exit asks "Do you really want to exit? (y/n)" and exits on y (the
#    Cadence shells ask before an exit that would lose a design);
#  - a numbered prompt, "wrapped 1> ", "wrapped 2> ", ... (Innovus'
#    "innovus 1> "), printed without a newline; a command's value is
#    printed, as at an interactive prompt.
# Lines are gathered until they form a complete command (info complete), as
# tclsh and these shells do.
fconfigure stdout -buffering none
set ::wrapped_log [open [expr {[info exists env(WRAPPED_LOG)] ? $env(WRAPPED_LOG) : "wrapped.log"}] a]
fconfigure $::wrapped_log -buffering line

rename source builtin_source
proc source {args} {
    set echo [expr {[lsearch -exact $args -echo] >= 0}]
    set verbose [expr {[lsearch -exact $args -verbose] >= 0}]
    set file [lindex $args end]
    set f [open $file r]
    set cmd ""
    while {[gets $f line] >= 0} {
        append cmd $line "\n"
        if {![info complete $cmd]} { continue }
        if {$echo} { puts $line }
        if {[catch {uplevel #0 $cmd} msg] && $verbose} { puts "Error: $msg" }
        set cmd ""
    }
    close $f
    return
}

rename puts tcl_puts
proc puts {args} {
    set text [lindex $args end]
    if {[llength $args] == 1 || ([llength $args] == 2 && [lindex $args 0] eq "-nonewline")} {
        tcl_puts -nonewline $::wrapped_log $text
        if {[lindex $args 0] ne "-nonewline"} { tcl_puts $::wrapped_log "" }
    }
    uplevel 1 [list tcl_puts {*}$args]
}

proc unknown {args} {
    return -code error "Error: unknown command '[lindex $args 0]' (CMD-005)"
}

rename exit tcl_exit
proc exit {{code 0}} {
    tcl_puts -nonewline "Do you really want to exit? (y/n) "
    if {[gets stdin answer] >= 0 && [string match {[yY]*} $answer]} { tcl_exit $code }
}

set n 1
set cmd ""
while 1 {
    if {$cmd eq ""} {
        tcl_puts -nonewline "wrapped $n> "
    }
    if {[gets stdin line] < 0} { tcl_exit 0 }
    append cmd $line "\n"
    if {![info complete $cmd]} { continue }
    if {[catch {uplevel #0 $cmd} msg]} {
        tcl_puts "Error: $msg"
    } elseif {$msg ne ""} {
        tcl_puts $msg
    }
    set cmd ""
    incr n
}
