# Compatibility file: the SkillPilot Tcl master is the package skillpilot
# (clients/tcl/skillpilot: "package require skillpilot" with clients/tcl on
# auto_path or TCLLIBPATH). Sourcing this file loads that package, reading
# its index with Tcl's own open and read (pkgIndex.tcl says why).
apply {{dir} {
    set c [open [file join $dir pkgIndex.tcl] r]
    fconfigure $c -encoding utf-8
    set s [read $c]
    close $c
    eval $s
    package require skillpilot 1.0
}} [file join [file dirname [file normalize [info script]]] skillpilot]
