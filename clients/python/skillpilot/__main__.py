"""python -m skillpilot: the Python master's command line (see skillpilot.cli)."""

import sys

from .cli import main

sys.exit(main())
