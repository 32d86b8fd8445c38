"""Files between Chameleon's Jupyter and the node, over notebook 2's own SSH connection
(python-chi's `Server.ssh_connection`, a Fabric connection: its `put` and `get`), so nothing a
student does is lost between the passes (notebook 0):

- `carry_notebooks`: the notebooks prepared here (the prepare pass) go to the node's clone, where
  the measure pass runs them, with what the prepare pass kept beside them (each notebook's
  prepared.json: your predictions with their times, your config.pbtxt edits); a notebook
  changed on the node since is never overwritten.
- `bring_back_bundles`: the measure pass's result bundles come back here before the server is
  deleted, to `bundles_here()`: where the review pass reads them with no setting (the
  repository's results/bundles/, beside this notebooks folder), in Chameleon's Jupyter as on a
  laptop.
- `share_ray_token`: notebook 9's Ray token, made once on the first node and copied to the
  second, never printed, never on a command line, never committed (.lab/ is git-ignored).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path

NOT_CARRIED = ("01_reserve.ipynb", "02_provision.ipynb")  # they run here, never on the node
CARRIED = ".lab/carried_notebooks.json"  # in the clone: the version of each notebook carried
BUNDLES = "results/bundles"  # in the clone, one folder per notebook (or where LAB_BUNDLE says)
RAY_TOKEN = ".lab/ray_token"  # in the clone
# Ray's own token authentication, on every `ray` command run on a node (the path is absolute
# once the node's shell expands $HOME)
RAY_AUTH = 'RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$HOME/{clone}/.lab/ray_token"'
# Ray opens its session folders, sockets and logs to every user (0777, no sticky bit): they go
# inside a folder of the node's user alone (0700), which Ray's chmod never opens, as in local
# mode (labstack/ray_cluster.py); short, since a socket's path must stay under 108 characters
RAY_PRIVATE = "$HOME/.lab_ray"


def ray_start(ray: str, args: str) -> str:
    """`ray start ARGS` with Ray's folders inside RAY_PRIVATE, in a subshell: after
    `ray status ||` it runs only where Ray does not run yet."""
    private = f'install -d -m 700 "{RAY_PRIVATE}" && umask 077'
    return f'({private} && {ray} start --temp-dir="{RAY_PRIVATE}/ray" {args})'


def blob_id(data: bytes) -> str:
    """git's id of a file's content (`git hash-object`), to compare without sending the file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def bundles_here(here: Path | None = None) -> Path:
    """Where the passes keep the bundles on this side, as servelab.passes.bundle.bundles_root()
    finds them for notebooks run from `here` (this notebooks folder): LAB_BUNDLE, else
    LAB_RESULTS_DIR/bundles, else the repository's results/bundles/. The prepare pass writes its
    prepared.json there, and the review pass reads the bundles brought back there."""
    if os.environ.get("LAB_BUNDLE"):
        return Path(os.environ["LAB_BUNDLE"])
    results = os.environ.get("LAB_RESULTS_DIR")
    return Path(results) / "bundles" if results else (here or Path.cwd()).parent / BUNDLES


# ---------------------------------------------------------------------- prepared notebooks
def carry_notebooks(node, here: Path, clone: str) -> None:
    """Every notebook of `here` but 1 and 2 to <clone>/notebooks/ on the node. A notebook the
    node has as the class's version, or as it was last carried, is replaced by yours; one
    changed on the node since (the measure pass ran there) is kept, and yours, if it changed
    too, is put beside it as NAME.from_jupyter.ipynb."""
    local = [p for p in sorted(here.glob("*.ipynb")) if p.name not in NOT_CARRIED]
    with node.ssh_connection() as conn:
        there = _node_notebooks(conn, clone)
        carried = _read_json(conn, f"{clone}/{CARRIED}")
        for path in local:
            data, name = path.read_bytes(), path.name
            mine, (on_node, committed) = blob_id(data), there.get(name, (None, None))
            target = f"{clone}/notebooks/{name}"
            if on_node == mine:
                what = "already there"
            elif on_node is None or on_node in (committed, carried.get(name)):
                conn.put(io.BytesIO(data), target)
                what = "carried to the node"
            elif mine == carried.get(name):
                print(
                    f"{name}: kept the node's copy (it differs from the one carried: changed on "
                    "the node, or the class's new version merged into it)"
                )
                continue
            else:
                beside = target.removesuffix(".ipynb") + ".from_jupyter.ipynb"
                conn.put(io.BytesIO(data), beside)
                print(
                    f"{name}: changed both here and on the node: the node's copy is kept, yours "
                    f"is beside it as {beside.split('/')[-1]}"
                )
                continue
            carried[name] = mine
            print(f"{name}: {what}")
        _carry_prepared(conn, here, clone, [p.stem for p in local])
        conn.run(f"mkdir -p {clone}/.lab", hide=True)
        conn.put(io.BytesIO(json.dumps(carried, indent=1).encode()), f"{clone}/{CARRIED}")


def _carry_prepared(conn, here: Path, clone: str, notebooks: list[str]) -> None:
    """Each notebook's prepared.json of the prepare pass here (bundles_here) to the bundle folder
    of the node's clone, where the measure pass reads it; only the prepare pass writes it, so the
    latest one goes."""
    root = bundles_here(here)
    found = [n for n in notebooks if (root / n / "prepared.json").is_file()]
    there = _node_bundles(conn, clone) if found else ""
    for name in found:
        conn.run(f"mkdir -p {there}/{name}", hide=True)
        conn.put(
            io.BytesIO((root / name / "prepared.json").read_bytes()),
            f"{there}/{name}/prepared.json",
        )
        print(f"{name}: what its prepare pass kept (prepared.json) carried to the node")


def _node_bundles(conn, clone: str) -> str:
    """Where the measure pass keeps its bundles on the node: LAB_BUNDLE there, else the clone's
    results/bundles/."""
    named = conn.run('printf "%s" "${LAB_BUNDLE-}"', hide=True).stdout.strip()
    root = named or BUNDLES
    return root if root.startswith("/") else f"{clone}/{root}"


def _node_notebooks(conn, clone: str) -> dict:
    """{name: (git id of the node's file, git id of the class's version or None)}."""
    listing = conn.run(
        f"cd {clone} && shopt -s nullglob && for f in notebooks/*.ipynb; do "
        'printf "%s %s %s\\n" "$(git hash-object "$f")" '
        '"$(git rev-parse -q --verify "HEAD:$f" || echo -)" "${f#notebooks/}"; done',
        hide=True,
    ).stdout
    found = {}
    for line in listing.splitlines():
        on_node, committed, name = line.split(" ", 2)
        found[name] = (on_node, None if committed == "-" else committed)
    return found


def _read_json(conn, path: str) -> dict:
    text = conn.run(f"cat {path} 2>/dev/null || true", hide=True).stdout
    return json.loads(text) if text.strip() else {}


# ---------------------------------------------------------------------- result bundles
def bring_back_before_delete(name: str, clone: str, dest: Path, servers=None) -> None:
    """Before servers are deleted (notebook 2's clean-up, notebook 1's DELETE_LEASE): the result
    bundles of the student's server `name` (the first node, where the notebooks run), if it is up
    and not being deleted already; `servers`: the list already read (chi_servers.lab_servers)."""
    from chi import server
    from chi_servers import being_deleted, lab_servers

    servers = lab_servers((name,)) if servers is None else servers
    up = [s for s in servers if s.name == name and s.status == "ACTIVE" and not being_deleted(s)]
    if not up:
        return
    public = [
        a for net in up[0].addresses.values() for a in net if a.get("OS-EXT-IPS:type") == "floating"
    ]
    if not public:
        raise RuntimeError(
            f"{name} has no public IP, so its result bundles cannot be brought back, and nothing "
            "was deleted: attach its IP (notebook 2, section 2) and run this cell again, or, to "
            "delete it without them, set BRING_BACK_BUNDLES = False."
        )
    bring_back_bundles(server.get_server(name), clone, dest)


def bring_back_bundles(node, clone: str, dest: Path) -> list[Path]:
    """The node's result bundles (<clone>/results/bundles/, or the folder LAB_BUNDLE names in the
    node's environment), every file, to `dest` here, folder by folder; a file already here is
    replaced by the node's. Stops with one sentence when the node does not answer."""
    from paramiko.ssh_exception import SSHException

    try:
        with node.ssh_connection(connect_timeout=10) as conn:
            root = _node_bundles(conn, clone)
            sftp = conn.sftp()
            files = _walk(sftp, root)
            if files is None:
                print(f"no result bundles on {node.name} ({root} does not exist)")
                return []
            got = []
            for rel in files:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                sftp.get(f"{root}/{rel}", str(dest / rel))
                got.append(dest / rel)
    except (OSError, EOFError, SSHException) as err:
        raise RuntimeError(
            f"{node.name} did not answer SSH ({err}), so its result bundles could not be "
            "brought back, and nothing was deleted: run this cell again in a few minutes, or, "
            "to delete it without them (a node that never ran a notebook), set "
            "BRING_BACK_BUNDLES = False."
        ) from None
    folders = sorted({p.relative_to(dest).parts[0] for p in got})
    print(
        f"brought back {len(got)} file(s) of {len(folders)} bundle(s) ({', '.join(folders)}) "
        f"from {node.name}:{root} to {dest}"
    )
    return got


def _walk(sftp, root: str, below: str = "") -> list[str] | None:
    """Every file under root, relative to it; None when root does not exist."""
    try:
        entries = sftp.listdir_attr(f"{root}/{below}" if below else root)
    except FileNotFoundError:
        return None
    files = []
    for entry in sorted(entries, key=lambda e: e.filename):
        rel = f"{below}/{entry.filename}" if below else entry.filename
        if stat.S_ISDIR(entry.st_mode):
            files += _walk(sftp, root, rel) or []
        else:
            files.append(rel)
    return files


# ---------------------------------------------------------------------- notebook 9's Ray token
def share_ray_token(first, second, clone: str) -> None:
    """The cluster's token: made once on the first node (64 hex digits from Python's `secrets`,
    as `ray get-auth-token --generate` makes them; mode 0600 from the start), then copied to the
    second node through this kernel, by SFTP: its value is never printed and never part of a
    command line."""
    path = f"{clone}/{RAY_TOKEN}"
    make = (
        f"cd {clone} && umask 077 && mkdir -p .lab && if [ ! -s {RAY_TOKEN} ]; then python3 -c "
        f"'import secrets, sys; sys.stdout.write(secrets.token_hex(32))' > {RAY_TOKEN}; fi && "
        f"chmod 600 {RAY_TOKEN}"
    )
    with first.ssh_connection() as one:
        one.run(make, hide=True)
        with one.sftp().open(path) as f:
            token = f.read()
    with second.ssh_connection() as two:
        two.run(f"cd {clone} && umask 077 && mkdir -p .lab && : > {RAY_TOKEN}", hide=True)
        sftp = two.sftp()
        sftp.chmod(path, 0o600)
        with sftp.open(path, "w") as f:
            f.write(token)
    print(f"Ray's token: made on {first.name} ({path}, mode 0600), copied to {second.name}")
