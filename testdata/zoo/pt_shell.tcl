#!/usr/bin/env tclsh
# pt_shell.tcl: the Synopsys prompt "pt_shell> " (PrimeTime; Design
# Compiler's is "dc_shell> "), and a continuation prompt "? " while a
# command is incomplete, as "Using Tcl With Synopsys Tools" ("Starting the
# Command-Line Interface") shows them. The shell prints the result of
# every command, and errors as "Error: <message>".
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "pt_shell> "
set ::zoo::prompt2 "? "
::zoo::repl
