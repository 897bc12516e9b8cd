#!/usr/bin/env python3
"""A flow script as a user writes one: synthesize with Yosys, then time the
netlist with OpenSTA, each tool in its own SkillPilot session, both driven
through the packaged Python master (clients/python on PYTHONPATH).

    flow.py YOSYS_SESSION STA_SESSION WORKDIR

WORKDIR holds counter.v, cells.lib, synth.ys and sta.tcl (testdata/flow);
both runners were started there, so the tools find the files the scripts
name. The timing report goes to stdout; it is what
`sta -no_splash -exit sta.tcl` prints in WORKDIR, byte for byte
(test/realtools/flow_test.go checks it).
"""
import os
import sys

from skillpilot import CommandFailed, Session


def main() -> int:
    yosys_dir, sta_dir, work = sys.argv[1:4]
    yosys, sta = Session(yosys_dir), Session(sta_dir)
    yosys.ready(timeout=120)
    sta.ready(timeout=120)
    try:
        with open(os.path.join(work, "synth.ys")) as f:
            yosys.run(f.read(), wait_timeout=600)
        with open(os.path.join(work, "sta.tcl")) as f:
            report = sta.run(f.read(), wait_timeout=600)
    except CommandFailed as e:
        print("flow: a step failed: %s" % e, file=sys.stderr)
        return 1
    sys.stdout.write(sta.output(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
