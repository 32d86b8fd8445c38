"""The class's settings for notebooks 1 and 2 (Chameleon). Instructors: fill in the first block
before publishing on Trovi, commit, tag that commit as REPO_REF, push the tag, and publish that
tag (docs/instructors.md); every student who launches the artifact gets these values. Students:
leave this file alone unless a notebook or your instructor tells you what to set.
"""

# --- set these once per class, before publishing ----------------------------------------------
# The git repository the node clones (https URL anyone can clone), and the tag the class uses.
# Trovi unpacks a copy without git history, so nothing here can be guessed: both are required.
REPO_URL = ""
REPO_REF = ""

# The Chameleon project of the course, as in the project drop-down (e.g. "CHI-231138").
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
SERVER_PREFIX = "node-serve-system-"  # then the user name: each student's one server
# then the user name: notebook 9's second node (a prefix of its own, so that no classmate's user
# name can make a first node's name equal to it, as "-2" after the name could)
SECOND_SERVER_PREFIX = "node2-serve-system-"
REPO_DIR = "serve-system-lab"  # the clone, in the node's home directory
HERE = "notebooks/lab_settings.py"


def problems() -> list[str]:
    """What is missing or wrong in the settings above, one sentence each (empty: all set).
    Checked before anything is reserved; the repository is asked with `git ls-remote`."""
    found = [
        f"{name} is empty: set it in {HERE} ({why})."
        for name, why in (
            ("REPO_URL", "the lab's git repository, which the node clones"),
            ("REPO_REF", "the tag the class uses, e.g. v1.0"),
            ("PROJECT", "the course's Chameleon project, e.g. CHI-231138"),
            ("SITE", "e.g. CHI@TACC"),
            ("NODE_TYPE", "e.g. gpu_p100"),
            ("IMAGE", "e.g. CC-Ubuntu24.04-CUDA"),
        )
        if not str(globals()[name]).strip()
    ]
    if not (isinstance(LEASE_HOURS, (int, float)) and 0 < LEASE_HOURS <= 24 * 7):
        found.append(
            f"LEASE_HOURS is {LEASE_HOURS!r}: set it in {HERE} to a number of hours, e.g. 3."
        )
    if REPO_URL and REPO_REF:
        found += _repository_problems()
    return found


def _repository_problems() -> list[str]:
    import os
    import re
    import subprocess

    no_prompt = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
    }  # a wrong URL must fail, not ask a password
    try:
        out = subprocess.run(
            ["git", "ls-remote", "--tags", "--heads", REPO_URL],
            capture_output=True,
            text=True,
            timeout=60,
            env=no_prompt,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return [f"REPO_URL {REPO_URL} could not be asked ({err}): check it in {HERE}."]
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["no answer"])[0]
        return [
            f"REPO_URL {REPO_URL} does not answer as a git repository ({why}): fix it in {HERE}."
        ]
    refs = {
        line.split("\t")[1].split("/", 2)[2].removesuffix("^{}") for line in out.stdout.splitlines()
    }
    if REPO_REF in refs or re.fullmatch(r"[0-9a-f]{40}", REPO_REF):
        return []  # a full commit id cannot be looked up this way; the node's checkout checks it
    return [
        f"REPO_REF {REPO_REF} is not a tag or branch of {REPO_URL}: push it (git push origin "
        f"{REPO_REF}) or set REPO_REF in {HERE} to one that is there."
    ]


def check() -> None:
    """Stop with every problem named, before any lease or server exists."""
    found = problems()
    if found:
        raise RuntimeError("The class settings need fixing first:\n- " + "\n- ".join(found))
