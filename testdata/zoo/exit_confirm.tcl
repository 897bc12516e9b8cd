#!/usr/bin/env tclsh
# exit_confirm.tcl: `exit` asks "Do you really want to exit? (y/n) " and
# reads the answer from the terminal; only y (or exit -force) ends the
# tool, as the Cadence shells ask before they leave with a design open
# (Innovus and Virtuoso users' forum threads on "exit -force" in batch
# scripts). End of input still ends it.
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "innovus %d> "
proc ::exit {args} {
    set code [lindex [lsearch -inline -not -all $args -force] 0]
    if {$code eq ""} { set code 0 }
    if {"-force" ni $args} {
        puts -nonewline "Do you really want to exit? (y/n) "
        flush stdout
        if {[gets stdin answer] >= 0 && ![string match -nocase y* [string trim $answer]]} {
            puts "Exit cancelled."
            return
        }
    }
    ::zoo::quit $code
}
::zoo::repl
