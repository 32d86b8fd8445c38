"""Run one command while the local stack's services are paused, so it has the cores to itself.

    python -m labstack.pause --reason "the raw model gets the cores to itself" -- CMD [ARGS...]

The launcher's own pause (labstack.launcher.paused: SIGSTOP to every running service, SIGCONT
after), as a command: notebook 7 measures the raw model this way through servelab.labenv.run_alone,
since the library the notebooks import knows nothing of the lab's machinery. Exits with the
command's exit code.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from labstack import launcher


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reason", default="", help="said when the services are paused")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run (write it after --)")
    with launcher.paused(args.reason):
        return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
