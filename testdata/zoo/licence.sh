#!/bin/sh
# licence.sh: a licence checkout that waits before the tool starts. It
# prints "Checking out license ..." without a newline, waits with the
# licence queued (FlexNet queuing: Synopsys tools with SNPSLMD_QUEUE=true,
# Cadence's "Specifying License Queuing Options", CDS_LIC_QUEUE_POLL,
# polling every 30 s or more; Star-Hspice's META_QUEUE), printing a dot now
# and then or nothing at all, then the banner and the shell (innovus.tcl).
# The failing one says "Failed to check out license ... queued" and exits.
#
#   ZOO_LICENSE_WAIT  seconds the checkout takes (90 by default, a real
#                     queue's shape; the tests use a few)
#   ZOO_LICENSE_DOTS  1: a dot every second while it waits; 0: nothing
#   ZOO_LICENSE_FAIL  1: the checkout fails after the wait, exit 1
dir=$(dirname "$0")
wait=${ZOO_LICENSE_WAIT:-90}
printf "Checking out license 'Zoo_Impl_System' "
i=0
while [ "$i" -lt "$wait" ]; do
    sleep 1
    i=$((i + 1))
    [ "${ZOO_LICENSE_DOTS:-1}" = 1 ] && printf .
done
echo
if [ "${ZOO_LICENSE_FAIL:-0}" = 1 ]; then
    echo "Failed to check out license 'Zoo_Impl_System': 4 of 4 licenses in use; the request was queued for ${wait} s and timed out"
    echo "**ERROR: (LIC-1) cannot run without a license, exiting"
    exit 1
fi
echo "License 'Zoo_Impl_System' checked out after ${wait} s."
echo "Zoo Implementation System 23.1 (a test shell of SkillPilot)"
exec tclsh "$dir/innovus.tcl"
