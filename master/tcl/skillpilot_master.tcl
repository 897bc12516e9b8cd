# Compatibility file: the SkillPilot Tcl master is the package skillpilot
# (master/tcl/skillpilot: "package require skillpilot" with master/tcl on
# auto_path or TCLLIBPATH). Sourcing this file loads that package.
apply {{dir} {
    source -encoding utf-8 [file join $dir pkgIndex.tcl]
    package require skillpilot 1.0
}} [file join [file dirname [file normalize [info script]]] skillpilot]
