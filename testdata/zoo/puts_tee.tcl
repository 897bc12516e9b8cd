#!/usr/bin/env tclsh
# puts_tee.tcl: `puts` redefined to write what goes to stdout to the
# session's log file as well as to the terminal, as the vendors' shells
# keep a log of everything printed (Innovus's innovus.log and .logv,
# Synopsys's sh_output_log_file; "Using Tcl With Synopsys Tools", "Using
# Command Log Files"). The log is $ZOO_LOG, else zoo_puts.log in the working
# directory.
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "innovus %d> "
set ::zoo::log [open [expr {[info exists env(ZOO_LOG)] ? $env(ZOO_LOG) : "zoo_puts.log"}] a]
fconfigure $::zoo::log -buffering line
rename ::puts ::zoo::tcl_puts
proc ::puts {args} {
    set nonl [expr {[lindex $args 0] eq "-nonewline"}]
    set rest [lrange $args $nonl end]
    if {[llength $rest] == 1 || [lindex $rest 0] in {stdout}} {
        set text [lindex $rest end]
        if {$nonl} { ::zoo::tcl_puts -nonewline $::zoo::log $text } else { ::zoo::tcl_puts $::zoo::log $text }
    }
    ::zoo::tcl_puts {*}$args
}
::zoo::repl
