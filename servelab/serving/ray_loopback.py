"""Ray kept on the loopback address, for a cluster of one machine (local mode, notebook 9).

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
"""

from __future__ import annotations

import sys

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


def main() -> int:
    keep_loopback()
    from ray.scripts.scripts import main as ray_main

    sys.argv[0] = "ray"
    return ray_main()


if __name__ == "__main__":
    sys.exit(main())
