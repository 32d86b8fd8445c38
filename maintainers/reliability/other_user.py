"""Another local user of the machine, for the checks that only one can make: what a student
sharing a lab machine reaches of the lab's files (tests/test_ray_security.py: Ray's folders).

another_user() makes a throwaway account with `useradd` (removed afterwards) where this process
runs as root, and says why not otherwise; attempts_as() runs each attempt in a child process that
has taken that user's identity (fork, then setgid/setuid: no program of ours need be readable by
that user) and answers, for each, "allowed" or the error the kernel gave.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import subprocess


@contextlib.contextmanager
def another_user():
    """Yield (uid, gid) of a throwaway account, or a str: why this machine gives none."""
    if os.geteuid() != 0:
        yield "the tests do not run as root: no other user to act as"
        return
    if not shutil.which("useradd"):
        yield "no useradd on this machine"
        return
    name = f"labprobe{secrets.token_hex(3)}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        yield f"useradd refused: {made.stderr.strip()}"
        return
    try:
        import pwd

        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", "--force", name], capture_output=True)


def attempts_as(uid: int, gid: int, attempts: dict) -> dict[str, str]:
    """Run each attempt (a function of no argument) as uid/gid: {name: "allowed" or the errno's
    name, e.g. "EACCES"}."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the other user from here on, never back
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            answers = {name: _outcome(attempt) for name, attempt in attempts.items()}
            os.write(write, json.dumps(answers).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data or b"{}")


def _outcome(attempt) -> str:
    try:
        attempt()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the parent judges
        return type(exc).__name__
    return "allowed"
