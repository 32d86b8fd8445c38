"""The figures the texts quote from the GPU and CPU reference pages, filled in between markers.

    python -m maintainers.figures          # make figures: every quoted figure computed afresh
    python -m maintainers.figures --check  # exit 1: a text quotes a figure its page no longer has

A text (README.md, maintainers/reference/README.md, docs/**/*.md, a page's notes.md, the notebooks'
sources) quotes a measured figure as `<!--fig NAME-->0.94<!--/fig-->` (in a notebook's code: a
string literal alone on its line, `"0.94"  # fig NAME`). NAME is a function in this package that
computes the text from the current page it cites (docs/results/<setup>/<page>/, pages.py), so a
new reference run rewrites the figures, and no test is named after a run. The prose around a
figure is the writer's: when a new run turns a comparison round, the text says so
(tests/test_figures.py checks the claims that a run could turn).

- core.py: the markers, the registry (`@figure(NAME)`), the rewriting
- pages.py: a page's files (summary tables, runs.json, logs)
- notebook4.py, notebook6.py, notebook7.py, notebook9.py, bench.py, two_gpus.py: the figures, by
  what they describe (two_gpus.py: notebook 6 on two GPUs and its `placement` part; notebook7.py
  the H100's and the H200's notebook-7 pages; notebook9.py the three-way pages, h200_9.6_*)
"""

from maintainers.figures import bench, notebook4, notebook6, notebook7, notebook9, two_gpus  # noqa: F401
from maintainers.figures.core import FIGURES, figure, render, stale, texts, unused
from maintainers.figures.pages import Page, page

__all__ = ["FIGURES", "Page", "figure", "page", "render", "stale", "texts", "unused"]
