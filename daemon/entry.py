"""The ``armd`` command's entry point: one clear line when the daemon's packages are not installed.

Why a module of its own: ``pip install armd`` is what a user's Spark
application needs for ``armd.agent``; the daemon's scheduler, metrics
server, plots, units and live view come with ``pip install 'armd[daemon]'``.
The command line imports them as it loads, so a missing one must be caught
before ``armd.daemon.cli`` is imported, not as a traceback from inside it.
For ``armd run`` it first keeps stop signals (``early_stop``): that import
takes seconds, and a SIGTERM meanwhile must stop the daemon, not kill it.
"""

from __future__ import annotations

import sys
from typing import Sequence

DAEMON_PACKAGES = ("apscheduler", "prometheus_client", "matplotlib", "humanfriendly", "rich")
"""The top-level modules of the ``daemon`` extra (pyproject.toml)."""

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if next((a for a in args if not a.startswith("-")), None) == "run":
        from . import early_stop

        early_stop.catch()  # loading the command line takes seconds: a SIGTERM meanwhile must stop, not kill, the daemon
    try:
        from armd.daemon.cli import main as cli_main
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in DAEMON_PACKAGES:
            raise
        print(f"armd: the daemon's command line needs the packages of armd[daemon] ({exc.name} is not installed); "
              "install them with: pip install 'armd[daemon]'", file=sys.stderr)
        return EXIT_USAGE
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
