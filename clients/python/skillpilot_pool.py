"""Compatibility module and script: the pool functions live in skillpilot.pool."""

from skillpilot.pool import *  # noqa: F401,F403
from skillpilot.pool import main, pool_locate, pool_pick, pool_sessions, pool_submit, pool_views, pool_wait  # noqa: F401

if __name__ == "__main__":
    main()
