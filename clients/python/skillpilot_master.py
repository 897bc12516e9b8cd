"""Compatibility module: the SkillPilot Python master is the package
``skillpilot`` (``pip install ./clients/python``, then ``import skillpilot``).
This module re-exports it for scripts that put clients/python on sys.path and
``import skillpilot_master``."""

from skillpilot import *  # noqa: F401,F403
from skillpilot import __all__, __version__  # noqa: F401
from skillpilot.cli import main as _main

if __name__ == "__main__":
    import sys
    sys.exit(_main())
