"""Words a program receives in its argv that no command line shows: for a secret that a program
takes only as a command-line option (perf_analyzer's `-H Header:Value`; docs/security.md).

Every local user can read every process's command line (/proc/<pid>/cmdline). argv_tail.c,
loaded with LD_PRELOAD, appends the lines of LAB_ARGV_TAIL to the argv the program's main()
receives and blanks that variable; the command line keeps the words the program was started
with. The environment is readable by the process's owner and root only.

    env, why_not = argv_tail.environment(env, ["-H", f"{header}:{key}"])
    # why_not == "": start the program with `env` and without those words;
    # else (no C compiler here, a library that is not ours) the caller keeps them on argv

The library is built once per machine with the system's C compiler into a folder only this user
can write (the lab's state folder, else a private temporary one), and used only if this user owns
it and nobody else can write it or its folder: whoever could replace it would read the tail.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from servelab.paths import LAB_DIR

SOURCE = Path(__file__).with_suffix(".c")
VARIABLE = "LAB_ARGV_TAIL"


def _private(path: Path) -> bool:
    """Ours, and nobody else may write it."""
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _folder() -> Path:
    for folder in (LAB_DIR / "bin", Path(tempfile.gettempdir()) / f"servelab-{os.getuid()}"):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if _private(folder) and os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise OSError("no folder of this user's own to build the library in")


def library() -> Path:
    """argv_tail.so, built from argv_tail.c on first use (OSError: it cannot be, and why)."""
    source = SOURCE.read_bytes()
    folder = _folder()
    target = folder / f"argv_tail-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if target.exists():
        if not _private(target):
            raise OSError(f"{target} is not this user's own")
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise OSError("no C compiler (cc, gcc) to build it")
    built = folder / f".{target.name}.{os.getpid()}"
    done = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(SOURCE), "-ldl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise OSError(f"{compiler} failed: {done.stderr.strip()[-300:]}")
    built.chmod(0o700)
    os.replace(built, target)
    return target


def environment(env: dict, words: list[str]) -> tuple[dict, str]:
    """`env` with what makes a program receive `words` after its own arguments, and "" ; or `env`
    as it was and why not (the caller then puts the words on the command line itself)."""
    if any("\n" in w or not w for w in words):
        return env, "a word is empty or holds a line break"
    try:
        lib = library()
    except OSError as exc:
        return env, str(exc)
    preload = " ".join(p for p in (str(lib), env.get("LD_PRELOAD", "")) if p)
    return {**env, "LD_PRELOAD": preload, VARIABLE: "\n".join(words)}, ""
