"""Ray kept on the loopback address, for a cluster of one machine (local mode, notebook 9), and
its files kept to the lab's user.

    python -m servelab.serving.ray_loopback start --head --node-ip-address=127.0.0.1 ...
                                                  # `ray start`, its node address left 127.0.0.1

With a node address of 127.0.0.1, Ray's own servers listen on 127.0.0.1 only: the GCS, each
raylet and object manager, the workers' and agents' gRPC servers, the Ray Client server, the
metrics exporters (measured with `ss -ltnp`, Ray 2.60; tests/test_ray_security.py keeps it so).
But Ray turns a loopback address into the machine's network address wherever it reads one
(`ray start --node-ip-address=127.0.0.1`, `--address=127.0.0.1:...`, `ray.init(address=...)`:
ray._private.services.resolve_ip_for_localhost; Ray issues 26293 and 59110), and with that
address its servers listen on every interface. keep_loopback() leaves a loopback address as it
is, in this process only: `ray start` here, and notebook 9's driver (servelab.ray_serving). An
address that is not loopback (Chameleon's two nodes) is untouched.

Ray makes its temporary folder, the session's and their `sockets/` and `logs/` 0777 without the
sticky bit (ray._common.utils.try_to_create_directory), so any local user could move the
raylet's socket aside or plant a symlink where a log is about to be created. main() refuses to
start unless the folder given as `--temp-dir` sits in a folder only this user can open
(private_parent(): labstack.ray_cluster makes it 0700 with mkdtemp), which Ray never chmods,
and starts Ray with umask 077: what Ray creates is its user's alone, behind a door it cannot open.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def keep_loopback() -> None:
    """Make Ray (in this process) take 127.0.0.1 as the node's address when it is given one."""
    from ray._private import services

    resolve = services.resolve_ip_for_localhost
    if getattr(resolve, "keeps_loopback", False):
        return

    def resolved(host: str) -> str:
        return "127.0.0.1" if host in LOOPBACK else resolve(host)

    resolved.keeps_loopback = True
    services.resolve_ip_for_localhost = resolved


def private_parent(argv: list[str]) -> str | None:
    """Why the `--temp-dir` of `argv` is not behind a folder private to this user (None if it
    is): the folder it sits in must be a real folder (no symlink) of this user, closed to the
    group and to others."""
    given = [a.split("=", 1)[1] for a in argv if a.startswith("--temp-dir=")]
    if not given:
        return "no --temp-dir: Ray would use /tmp/ray, open to every local user"
    parent = Path(given[-1]).parent
    try:
        info = os.lstat(parent)
    except OSError as exc:
        return f"{parent}: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return f"{parent} is not a folder of this user's alone (0700): Ray's files would be open"
    return None


def main() -> int:
    keep_loopback()
    if sys.argv[1:2] == ["start"] and (why := private_parent(sys.argv)):
        print(f"not starting Ray: {why}", file=sys.stderr)
        return 2
    os.umask(0o077)  # Ray's files and sockets: its user's only (its chmods open the folders)
    from ray.scripts.scripts import main as ray_main

    sys.argv[0] = "ray"
    return ray_main()


if __name__ == "__main__":
    sys.exit(main())
