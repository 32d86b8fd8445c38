"""The class's settings for notebooks 1 and 2 (Chameleon). Instructors: edit the values in the
first block once, commit, tag, and publish that tag on Trovi (docs/instructors.md); every student
who launches the artifact gets them. Students: leave this file alone unless told otherwise.
"""

# --- set these once per class ------------------------------------------------------------------
# The git repository the node clones, and the tag (or commit) you teach from. Left empty, they
# default to the repository these notebooks were cloned from (its `origin`) and the commit they
# are at, which is right whenever the notebooks themselves came from a git clone of the lab.
REPO_URL = ""
REPO_REF = ""

# The Chameleon project of the course (as in the project drop-down, e.g. "CHI-231138"). Empty:
# notebooks 1 and 2 show a drop-down and use its first project until the student picks another.
PROJECT = ""

# Where and what to reserve. gpu_p100 (2x P100) at CHI@TACC is the node the lab was written for.
SITE = "CHI@TACC"
NODE_TYPE = "gpu_p100"
IMAGE = "CC-Ubuntu24.04-CUDA"
LEASE_HOURS = 3

# --- derived: nothing to edit below ------------------------------------------------------------
# Every lease of this lab starts with this prefix (then the user name and the start time), so a
# student's old, ended leases never share a name with a new one.
LEASE_PREFIX = "serve_system_"


def _from_this_checkout(*git_args: str) -> str:
    """Ask git about the repository this file is in; "" when it is not a git checkout."""
    import subprocess
    from pathlib import Path

    try:
        out = subprocess.run(["git", *git_args], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


REPO_URL = REPO_URL or _from_this_checkout("remote", "get-url", "origin")
REPO_REF = REPO_REF or _from_this_checkout("rev-parse", "HEAD")
