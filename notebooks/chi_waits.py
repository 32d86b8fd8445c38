"""How long notebooks 1 and 2 wait for Chameleon, and the one loop that does it.

Each long wait has a limit a little past what the site usually takes; when it runs out, the
notebook stops with one sentence (what happened, what you still hold, what to do next), never a
library's traceback. Running the cell again waits again for the same thing: nothing is made twice.
"""

from __future__ import annotations

import time

# Blazar's STARTING (or UPDATING): it prepares the lease's hosts, a few minutes.
LEASE_START_MINUTES = 15
# A bare-metal boot (Nova's BUILD): 10 to 20 minutes, now and then more.
BOOT_MINUTES = 30
# SSH: the node's sshd starts, and cloud-init installs your key, minutes after ACTIVE.
SSH_MINUTES = 15
# A bare-metal server's delete: the node is powered off and torn down, a few minutes.
DELETE_MINUTES = 10


def until(check, minutes: float, every_s: float):
    """Call check() every every_s seconds until it returns something other than None, for at
    most `minutes`; return that, or None when the time ran out (check() ran one last time)."""
    deadline = time.monotonic() + minutes * 60
    while True:
        found = check()
        if found is not None:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(every_s, left))


def minutes_since(started: float) -> int:
    """Whole minutes since a time.monotonic() reading, for the sentences."""
    return round((time.monotonic() - started) / 60)
