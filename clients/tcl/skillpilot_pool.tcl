# Compatibility file: the pool procs are part of the skillpilot package
# (package require skillpilot); sourcing this file loads them alone, read
# with Tcl's own open and read (skillpilot/pkgIndex.tcl says why).
apply {{p} {
    set c [open $p r]
    fconfigure $c -encoding utf-8
    set s [read $c]
    close $c
    set was [info script]
    info script $p
    try {uplevel #0 $s} finally {info script $was}
}} [file join [file dirname [file normalize [info script]]] skillpilot pool.tcl]
