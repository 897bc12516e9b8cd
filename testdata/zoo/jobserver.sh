#!/bin/sh
# jobserver.sh: a tool that starts a child that outlives it: a job server
# (Innovus's distributed processing, setDistributeHost/setMultiCpuUsage
# -remoteHost; PrimeTime's set_host_options for multi-scenario runs;
# Vivado's hw_server) started in a session of its own, so that it keeps
# the terminal open after the tool exits and is out of the tool's process
# group. Then the shell (innovus.tcl) runs in this process.
#
#   ZOO_JOBSERVER_LIFE     seconds the job server lives (3600)
#   ZOO_JOBSERVER_PIDFILE  the file it appends its pid to (jobserver.pid)
dir=$(dirname "$0")
setsid sh -c 'echo $$ >> "$1"; echo "Job server started (pid $$)"; exec sleep "$2"' jobserver \
    "${ZOO_JOBSERVER_PIDFILE:-jobserver.pid}" "${ZOO_JOBSERVER_LIFE:-3600}" &
exec tclsh "$dir/innovus.tcl"
