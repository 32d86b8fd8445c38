"""One notebook, three passes (introduced in notebook 3): prepare before the lease, measure in it,
review after it, chosen by LAB_PASS (default measure: every cell, in one go).

    PASS = passes.start("06_triton_benchmarks")     # the first cell: the pass, the bundle
    %%runs_in measure review                        # a cell's first line: where it runs
    httpclient = passes.node_import("tritonclient.http")   # the real client where the node is
    passes.finish()                                 # the last cell: where the bundle is

    choice.py      LAB_PASS read, what each pass does, and Stop (one sentence, no traceback)
    start.py       the first and last cells: the pass printed, the bundle opened, checked, packed
    cells.py       the `%%runs_in` line: a cell runs in the passes it names, else says where
    bundle.py      the results bundle: plain CSV/JSON per notebook in results/bundles/<notebook>/
    cut_short.py   the review of a bundle the lease's end cut short: every step it holds, the
                   rest named
    node_calls.py  what a notebook asks of the node: kept by measure, given back by review
    record.py      your predictions and lines, kept with the time you wrote them
    offline.py     a tool that lives on the node (tritonclient), as the other passes see it
"""

from servelab.passes.choice import MEASURE, PREPARE, REVIEW, Stop, current, measures, replays
from servelab.passes.node_calls import change, on_node
from servelab.passes.offline import OfflineCall, node_import
from servelab.passes.start import finish, start

__all__ = [
    "MEASURE",
    "PREPARE",
    "REVIEW",
    "OfflineCall",
    "Stop",
    "change",
    "current",
    "finish",
    "measures",
    "node_import",
    "on_node",
    "replays",
    "start",
]
