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
# The banner is printed here, before the shell starts, not by the job
# server: printed whenever the job server got to it, it landed after a
# prompt now and then, in the middle of what a command was waiting for.
# ($! is the job server: setsid does not fork when it is no group leader.)
pidfile=${ZOO_JOBSERVER_PIDFILE:-jobserver.pid}
setsid sh -c 'echo $$ >> "$1"; exec sleep "$2"' jobserver \
    "$pidfile" "${ZOO_JOBSERVER_LIFE:-3600}" &
js=$!
# The tool goes on once the job server is in a session of its own (it
# writes its pid after setsid): a tool that exited before that, on a loaded
# machine, took a job server still in its process group down with it.
i=0
while ! grep -qx "$js" "$pidfile" 2>/dev/null && [ "$i" -lt 300 ]; do
    sleep 0.01
    i=$((i + 1))
done
echo "Job server started (pid $js)"
exec tclsh "$dir/innovus.tcl"
