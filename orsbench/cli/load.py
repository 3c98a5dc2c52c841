"""``orsbench load [LOCUST ARGS...]``: Locust with orsbench's locustfile, from any directory.

``locust -f orsbench/load.py`` names a path relative to a checkout's root; an installed orsbench
has no such path where the user stands. This command finds the locustfile where orsbench is
installed and runs ``python -m locust -f <it>`` with every other argument as given — Locust's own
(``--headless -u 20 -t 30s --host URL``) and the locustfile's (``--ors-env``, ``--ors-calls``, ...; docs/load.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from orsbench.cli import subcommand

EPILOG = """\
examples:
  orsbench load --headless -u 20 -r 10 -t 20s                          # an embedded echo mock
  orsbench load --headless -u 50 -r 10 -t 60s --host http://127.0.0.1:8000 --ors-env myenv
  orsbench load --host http://127.0.0.1:8000                           # Locust's web UI on :8089
  orsbench load --help                                                 # Locust's options and the --ors-* ones

Needs the load extra: pip install "orsbench[load]". The same as `locust -f orsbench/load.py ...` run
from a checkout's root; the exit code is Locust's.
"""


@subcommand("load")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "load",
        help="run Locust with orsbench's locustfile (whole ORS episodes per user), from any directory",
        description="Run Locust on orsbench/load.py wherever orsbench is installed; every argument goes to Locust.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,  # --help is Locust's, with the locustfile's arguments
    )
    parser.add_argument("locust_args", nargs=argparse.REMAINDER, metavar="LOCUST ARGS", help="Locust's arguments and the --ors-* ones")
    # Options argparse does not know are Locust's: cli.main hands them here instead of refusing them.
    parser.set_defaults(func=run, _passthrough="locust_args")


def run(args: argparse.Namespace) -> int:
    from orsbench.bench.locust_run import locustfile
    from orsbench.extras import require

    require("load", "orsbench load (Locust)")
    given = list(args.locust_args)
    if not given or any(a in ("-h", "--help") for a in given):
        # Locust prints its help before it imports a locustfile (locust#2917): this one lists the --ors-* arguments.
        done = subprocess.run([sys.executable, "-m", "orsbench.load", "--help"], check=False)
        print(f"\n{EPILOG}")
        return done.returncode if given else 2
    # Locust's own main, named as this command: its usage errors read "orsbench load: error: ...".
    launcher = "import sys; sys.argv[0] = 'orsbench load'; from locust.main import main; main()"
    return subprocess.run([sys.executable, "-c", launcher, "-f", locustfile(), *given], check=False).returncode
