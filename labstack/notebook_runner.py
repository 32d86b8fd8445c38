"""Execute a lab notebook headless (nbclient) with parameters passed as LAB_* environment variables.

    python -m labstack.notebook_runner solutions/04_fastapi_benchmarks.ipynb results/04.ipynb \
        --param N_SEQUENTIAL=20 --echo --cwd notebooks

The runners execute the solved edition (labstack/editions.py) with notebooks/ as its working
folder (--cwd), so it finds what a student's notebook finds there. Where the notebook file is not
(the Docker tests' Jupyter container), embedded_program() puts it inside this runner's source,
which goes in on stdin: `python - - OUT`.

With echo, each cell's start (with the time elapsed) and every line the cells print are written to
stdout as they happen: progress for a long run, and how `make test-docker` sees the host commands
a notebook prints ("Run this on the host ...") while the notebook waits for them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from servelab.paths import REPO_ROOT

# The notebook itself, when embedded_program() made this source (the notebook argument is then -)
EMBEDDED_NOTEBOOK: str | None = None


class EchoingClient(NotebookClient):
    """A NotebookClient that also writes progress and the cells' printed text to a stream."""

    def __init__(self, *args, stream=sys.stdout, **kwargs):
        super().__init__(*args, **kwargs)
        self._stream = stream
        self._start = time.time()
        self._code_cells = sum(c.cell_type == "code" for c in self.nb.cells)
        self._done = 0
        self.on_cell_start = self._cell_started

    def _say(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

    def _cell_started(self, cell, cell_index, **_):
        if cell.cell_type != "code":
            return
        self._done += 1
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        self._say(
            f"[{time.time() - self._start:6.0f} s] cell {self._done}/{self._code_cells}: "
            f"{first[:70]}\n"
        )

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] == "stream":
            self._say(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            self._say(f"{msg['content']['ename']}: {msg['content']['evalue']}\n")
        return super().output(outs, msg, display_id, cell_index)


def execute(
    notebook: Path,
    out_path: Path,
    params: dict | None = None,
    extra_env: dict | None = None,
    cell_timeout: int = 1800,
    echo: bool = False,
    cwd: Path | None = None,
) -> float:
    """Run every cell top to bottom in `cwd` (default: the notebook's folder); write the executed
    copy to out_path (also when a cell fails). notebook "-": the embedded one."""
    if str(notebook) == "-":
        nb = nbformat.reads(EMBEDDED_NOTEBOOK, as_version=4)
    else:
        nb = nbformat.read(notebook, as_version=4)
    env = {
        **os.environ,
        **(extra_env or {}),
        **{f"LAB_{k}": str(v) for k, v in (params or {}).items()},
    }
    env.setdefault("PYTHONPATH", str(REPO_ROOT))
    client_class = EchoingClient if echo else NotebookClient
    client = client_class(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        resources={
            "metadata": {"path": str(Path(cwd).resolve() if cwd else Path(notebook).parent)}
        },
    )
    start = time.time()
    try:
        client.execute(env=env)  # passed on to the kernel process
    finally:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out_path)
    return time.time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("out", type=Path, help="where the executed copy is written")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="sets LAB_NAME=VALUE for the notebook (repeatable)",
    )
    parser.add_argument(
        "--echo", action="store_true", help="print progress and the cells' output as they run"
    )
    parser.add_argument("--cell-timeout", type=int, default=1800)
    parser.add_argument(
        "--cwd", type=Path, help="the folder the cells run in (default: the notebook's)"
    )
    args = parser.parse_args(argv)
    params = dict(p.split("=", 1) for p in args.param)
    name = "the embedded notebook" if str(args.notebook) == "-" else args.notebook.name
    try:
        seconds = execute(
            args.notebook,
            args.out,
            params,
            cell_timeout=args.cell_timeout,
            echo=args.echo,
            cwd=args.cwd,
        )
    except Exception as exc:  # the cell's error, with the notebook that holds the traceback
        print(
            f"FAILED {name}: {type(exc).__name__}: {str(exc)[-2000:]}\n"
            f"(executed copy with the traceback: {args.out})",
            file=sys.stderr,
        )
        return 1
    print(f"OK {name} in {seconds:.0f} s -> {args.out}")
    return 0


def embedded_program(notebook: Path) -> str:
    """This runner's source with the notebook inside, for `python - - OUT [--cwd DIR]` on a
    machine that has servelab/ but not the notebook file (the Docker tests' Jupyter container)."""
    sentinel = "EMBEDDED_NOTEBOOK: str | None = None\n"
    source = Path(__file__).read_text()
    assert source.count(sentinel) == 1, "the runner's EMBEDDED_NOTEBOOK line moved"
    return source.replace(sentinel, f"EMBEDDED_NOTEBOOK = {notebook.read_text()!r}\n")


if __name__ == "__main__":
    sys.exit(main())
