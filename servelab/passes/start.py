"""A notebook's first and last cells: the pass it runs, its bundle opened, and where it ends up.

Introduced in notebook 3.

    PASS = passes.start("04_fastapi_benchmarks")   # the first cell
    passes.finish()                                # the last: where the bundle is, how to get it

start() prints the pass (LAB_PASS) and what it does, teaches IPython the `%%runs_in` line of the
cells that need the node (servelab/passes/cells.py), and opens the notebook's bundle: measure
keeps its results there, review reads them (and refuses, in one sentence, a bundle of another
notebook or another class version, before anything is written; a bundle cut short by the lease's
end is reviewed for the steps it holds: servelab/passes/cut_short.py). A
notebook that has no pass but measure (notebooks 7 to 9) says so when opened in another.
"""

from __future__ import annotations

import platform
import shutil

from servelab.passes import bundle as bundles
from servelab.passes import cells, cut_short
from servelab.passes.choice import MEASURE, PASSES, PREPARE, REVIEW, WHAT, Stop, current
from servelab.passes.node_calls import STATE


def start(notebook: str, passes: tuple[str, ...] = PASSES) -> str:
    """Begin `notebook` (its file name without .ipynb) in this kernel's pass; returns the pass."""
    lab_pass = current()
    if lab_pass not in passes:
        raise Stop(
            f"{notebook} runs in the {' and '.join(passes)} pass only (LAB_PASS={lab_pass}): "
            f"it needs the node throughout; set LAB_PASS={passes[0]} to run it."
        )
    if lab_pass == REVIEW and (folder := bundles.unpacked(notebook)):
        print(f"{notebook}.zip unpacked into {folder}")
    bundle = bundles.Bundle.of(notebook)
    if lab_pass == REVIEW:
        bundles.must_review(bundle, notebook)
    elif lab_pass == MEASURE:
        _may_continue(bundle, notebook)
        bundle.begin(notebook, lab_pass)
        bundle.manifest.update(host=platform.node())
        bundle.save()
    STATE.update({"pass": lab_pass, "notebook": notebook, "bundle": bundle})
    cells.install()
    print(f"LAB_PASS={lab_pass}: {WHAT[lab_pass]}")
    print(f"results bundle: {bundle.folder}" + (" (read)" if lab_pass == REVIEW else ""))
    cut_short.end()
    if lab_pass == REVIEW and bundles.cut_short(bundle):
        cut_short.begin(bundle, notebook)
    return lab_pass


def _may_continue(bundle: bundles.Bundle, notebook: str) -> None:
    """A measure pass adds to this notebook's bundle of this class version, never to another."""
    m = bundle.manifest
    if bundle.exists and (m.get("notebook"), m.get("class_version")) != (
        notebook,
        bundles.CLASS_VERSION,
    ):
        raise Stop(
            f"{notebook}: {bundle.folder} holds a bundle of {m.get('notebook')}, class version "
            f"{m.get('class_version')}: move it away first (nothing was changed)."
        )


def finish() -> None:
    """The last cell: the measure pass marks its bundle whole and packs it into one .zip to
    download; each pass says where its results are."""
    lab_pass, bundle, notebook = STATE["pass"], STATE["bundle"], STATE["notebook"]
    if lab_pass is None:
        raise Stop("run this notebook's first cell first: it says which pass this is.")
    if lab_pass == PREPARE:
        print(
            f"{notebook} prepared: your predictions and lines are in {bundle.folder}/"
            "prepared.json. In the lease, open this notebook on the node with LAB_PASS=measure."
        )
        return
    if lab_pass == REVIEW:
        print(f"{notebook} reviewed from {bundle.folder}; nothing in the bundle was changed.")
        if cut_short.STATE["on"]:
            print(cut_short.summary(notebook))
        return
    bundle.manifest["finished"] = True
    bundle.save()
    packed = shutil.make_archive(str(bundle.folder), "zip", bundle.folder.parent, notebook)
    entries = len(bundle.manifest["entries"])
    print(
        f"{notebook}: the bundle is complete, {entries} runs and readings in {bundle.folder}/, "
        f"packed as {packed}.\nNotebook 2's last cell brings every bundle back to where the "
        "review pass reads them (results/bundles/ beside your notebooks); by hand: in "
        f"JupyterLab's file browser open {bundle.folder.parent.name}/, right-click "
        f"{notebook}.zip, Download, and put it in results/bundles/ where you review."
    )
