#!/usr/bin/env tclsh
# stderr.tcl: a shell that writes its prompt and its error messages to
# stderr and results to stdout, both on the terminal, so that what a
# command prints comes on two streams interleaved (Python's interactive
# interpreter writes its prompt to stderr, sys.ps1; Yosys, Vivado and the
# Synopsys shells write warnings and errors on stderr).
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "zoo_stderr> "
set ::zoo::out stderr
::zoo::repl
