#!/usr/bin/env tclsh
# innovus.tcl: a numbered prompt that changes after every command,
# "innovus 1> ", "innovus 2> ", ..., printed without a newline right after
# whatever the command printed, as Cadence Innovus prints it (Innovus User
# Guide, "Getting Started": the prompt carries the command number; Genus
# does the same, "@genus:root: 1> "). Errors are printed as Innovus prints
# them, "**ERROR: (TCLCMD-...)". Nothing else differs from tclsh.
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "innovus %d> "
set ::zoo::errfmt "**ERROR: (TCLCMD-989): %s"
::zoo::repl
