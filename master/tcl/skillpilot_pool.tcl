# Compatibility file: the pool procs are part of the skillpilot package
# (package require skillpilot); sourcing this file loads them alone.
source -encoding utf-8 [file join [file dirname [info script]] skillpilot pool.tcl]
