#!/usr/bin/env tclsh
# vivado.tcl: the prompt of Xilinx Vivado's Tcl mode, "Vivado% " (vivado
# -mode tcl; UG894 "Using Tcl Scripting", UG835 "Tcl Command Reference"),
# with errors as Vivado prints them, "ERROR: [Common 17-...] <message>".
source [file join [file dirname [info script]] repl.tcl]
set ::zoo::prompt1 "Vivado% "
set ::zoo::errfmt {ERROR: [Common 17-55] %s}
::zoo::repl
