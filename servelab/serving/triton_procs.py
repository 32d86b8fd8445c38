"""What /proc and /dev/shm say about a tritonserver and its Python-backend stubs: the process tree,
which model a stub serves and whether it runs, is stopped or died, and the stubs' shared-memory
regions (made private, and removed once no process maps them). Standard library only: the
watchdog (servelab.serving.triton_watchdog) runs in Triton's image too.
"""

from __future__ import annotations

import os
import secrets
import string
import time
from pathlib import Path

STUB = "triton_python_backend_stub"


def _parents() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(stat.parent.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = _parents(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def proc_state(pid: int) -> str:
    """The process state letter (R, S, D, T stopped, t traced, Z zombie...), or 'gone'."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def stub_model(pid: int) -> str | None:
    """The model a running stub serves (from its command line), else None."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if len(argv) < 2 or not argv[0].decode(errors="replace").endswith(STUB):
        return None
    parts = Path(argv[1].decode(errors="replace")).parts
    return parts[-3] if len(parts) >= 3 else None


def stubs_of(prefix: str) -> list[int]:
    """The Python-backend stubs running (not zombies) whose shared-memory region is named
    prefix*: one server's stubs (the prefix names its port), found by their command line."""
    if not prefix:
        return []
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        stub = argv[0].decode(errors="replace").endswith(STUB)
        if stub and any(a.startswith(prefix.encode()) for a in argv[1:]):
            pid = int(cmdline.parent.name)
            if proc_state(pid) not in ("Z", "gone"):
                found.append(pid)
    return found


def server_pids() -> list[int]:
    """tritonserver processes of this user (in a container: the container's)."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "tritonserver" and comm.stat().st_uid == os.getuid():
                found.append(int(comm.parent.name))
        except (OSError, ValueError):
            continue
    return found


def mapped_shm() -> set[str]:
    """Names of the /dev/shm objects some process we can see has mapped."""
    names = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            at = line.find(" /dev/shm/")
            if at >= 0:
                names.add(line[at + len(" /dev/shm/") :].split(" (deleted)")[0])
    return names


def remove_stale_regions(prefix: str, shm: Path = Path("/dev/shm")) -> list[str]:
    """Remove this user's /dev/shm objects named prefix* that no running process maps: what the
    stubs of a crashed tritonserver leave behind. Returns the names removed."""
    if not prefix:
        return []
    in_use = mapped_shm()
    removed = []
    for region in sorted(shm.glob(prefix + "*")):
        try:
            if region.stat().st_uid == os.getuid() and region.name not in in_use:
                region.unlink()
                removed.append(region.name)
        except OSError:
            continue
    return removed


def privatise_regions(prefix: str, shm: Path = Path("/dev/shm")) -> int:
    """Make this user's regions named prefix* readable by their owner only. The Python backend
    creates them 0644 whatever the umask (Boost sets the mode itself), so any local user could
    read the tensors passing through a stub. Returns how many were changed."""
    changed = 0
    for region in shm.glob(prefix + "*") if prefix else ():
        try:
            info = region.stat()
            if info.st_uid == os.getuid() and info.st_mode & 0o077:
                region.chmod(0o600)
                changed += 1
        except OSError:
            continue
    return changed


def shm_prefix(argv: list[str]) -> str:
    """The Python backend's region prefix on a tritonserver command line ('' if none is set)."""
    flag = "python,shm-region-prefix-name="
    for arg in argv:
        if arg.startswith("--backend-config=" + flag):
            return arg.split(flag, 1)[1]
    return ""


def region_bytes(pid: int, prefix: str) -> int:
    """The size of the largest /dev/shm region named prefix* that process pid maps (0 if none)."""
    if not prefix:
        return 0
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return 0
    sizes = [0]
    for name in {ln.split()[-1] for ln in maps.splitlines() if f"/dev/shm/{prefix}" in ln}:
        try:
            sizes.append(Path(name).stat().st_size)
        except OSError:
            continue
    return max(sizes)


def hide_argument(pid: int, secret: str, wait_s: float = 10.0) -> str:
    """Overwrite `secret` on process pid's command line with random capital letters, in the
    process's own memory (/proc/<pid>/mem, which its parent may write), once it has read its
    options: its command line, which every local user can read, then no longer shows it.

    For tritonserver, which takes its admin key on its command line only and copies it while it
    parses its options, before it starts its first thread. So this waits for a second thread; the
    mask is random, never a value anyone could send, and the caller checks afterwards that the
    server still answers the real key. Returns '' once hidden, else why not."""
    deadline = time.monotonic() + wait_s
    task = Path(f"/proc/{pid}/task")
    try:
        while len(os.listdir(task)) < 2:
            if time.monotonic() > deadline:
                return f"no second thread within {wait_s:.0f} s"
            time.sleep(0.005)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        found = 0
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            args = mem.read(end - start)
            at = args.find(secret.encode())
            while at >= 0:
                mask = "".join(secrets.choice(string.ascii_uppercase) for _ in secret)
                mem.seek(start + at)
                mem.write(mask.encode())
                found += 1
                at = args.find(secret.encode(), at + 1)
    except (OSError, ValueError, IndexError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "" if found else "not on its command line"
