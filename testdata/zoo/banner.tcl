#!/usr/bin/env tclsh
# banner.tcl: a start-up banner of 10,000 lines before the first prompt, as
# the vendors' shells print copyright notices, the licence features they
# checked out, every setup file they read and every variable those set
# (Synopsys shells echo .synopsys_*.setup; Innovus lists the libraries it
# loads). ZOO_BANNER_LINES changes the count.
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "pt_shell> "
set lines [expr {[info exists env(ZOO_BANNER_LINES)] ? $env(ZOO_BANNER_LINES) : 10000}]
for {set i 1} {$i <= $lines} {incr i} {
    puts "Information: banner line $i of $lines: reading setup, libraries and licences (ZOO-$i)"
}
::zoo::repl
