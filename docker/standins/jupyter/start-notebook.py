#!/opt/conda/bin/python
"""STAND-IN start-notebook.py: JupyterLab on every interface of the container, port 8888."""

import os
import shlex
import sys

command = [
    "jupyter",
    "lab",
    "--ServerApp.ip=0.0.0.0",
    "--ServerApp.open_browser=False",
    *shlex.split(os.environ.get("NOTEBOOK_ARGS", "")),
    *sys.argv[1:],
]
print("Executing (STAND-IN):", " ".join(command), flush=True)
os.execvp(command[0], command)
