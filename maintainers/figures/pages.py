"""A reference page's files, read for the figures the texts quote (docs/results/<setup>/<page>/)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd

from servelab.paths import REPO_ROOT

RESULTS = REPO_ROOT / "docs" / "results"


class Page:
    """One current reference page: a notebook (or a maintainers' check) on one setup."""

    def __init__(self, setup: str, name: str, root: Path = RESULTS):
        self.folder = root / setup / name
        self.setup, self.name = setup, name

    def path(self, relative: str) -> Path:
        found = self.folder / relative
        if not found.exists():
            raise FileNotFoundError(f"{found}: the file a figure is computed from is missing")
        return found

    def json(self, relative: str) -> dict:
        return json.loads(self.path(relative).read_text())

    @functools.cache
    def csv(self, relative: str, index: str | None = None) -> pd.DataFrame:
        """A CSV of the page (read once; callers do not change it)."""
        table = pd.read_csv(self.path(relative))
        return table.set_index(index) if index else table

    def summary(self, part: str) -> pd.DataFrame:
        """A notebook part's summary.csv, one row per run, indexed by the run's name."""
        return self.csv(f"results/{part}/summary.csv", index="run")

    def log(self, relative: str) -> str:
        return self.path(relative).read_text()

    def day(self, part: str) -> str:
        """The day a part of this page ran (runs.json), e.g. '2026-11-26'."""
        return self.json("runs.json")[part]["started"].split()[0]

    def minutes(self, part: str) -> float:
        return self.json("runs.json")[part]["seconds"] / 60


@functools.cache
def page(setup: str, name: str) -> Page:
    return Page(setup, name)
