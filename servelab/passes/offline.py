"""A tool that lives on the node, as the passes without the node see it: your calls, written down.

Introduced in notebook 5.

    httpclient = passes.node_import("tritonclient.http")
    client = httpclient.InferenceServerClient(HOST)
    ready = client.is_server_ready()

In the measure pass node_import() is `import tritonclient.http`: the real client, the real
server. In prepare and review (no node, and no tritonclient in requirements/review.txt) it is a
stand-in that sends nothing: each call you write comes back as an OfflineCall that says what you
called, and the exercise checks (exercises.result) answer it as written, to be sent in the
measure pass.
"""

from __future__ import annotations

import importlib

from servelab.passes.choice import measures


class OfflineCall:
    """A call (or attribute) of a tool that is not here, as written: `client.load_model(...)`."""

    def __init__(self, said: str):
        self._said = said

    def __getattr__(self, name: str) -> OfflineCall:
        if name.startswith("__"):
            raise AttributeError(name)
        return OfflineCall(f"{self._said}.{name}")

    def __call__(self, *args, **kwargs) -> OfflineCall:
        shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        return OfflineCall(f"{self._said}({', '.join(shown)})")

    def __getitem__(self, key) -> OfflineCall:
        return OfflineCall(f"{self._said}[{key!r}]")

    def __repr__(self) -> str:
        return self._said

    __str__ = __repr__


def node_import(module: str, name: str | None = None):
    """`module` itself in the measure pass; elsewhere a stand-in that writes your calls down (its
    name in what it shows: `name`, default the module's last part)."""
    if measures():
        return importlib.import_module(module)
    return OfflineCall(name or module.rsplit(".", 1)[-1])
