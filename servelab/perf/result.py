"""A perf_analyzer run as the notebooks hold it: its name, your line, what ran, what came back.

Introduced in notebook 6 (perf.run_line makes one; the review pass reads one back from the
bundle, servelab/perf/saved.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.perf import output
from servelab.perf.line import Line


@dataclass
class Run:
    """One perf_analyzer run: its name, your line (read once), what ran and what came back."""

    name: str
    line: Line
    command: list[str]  # what ran, the node's secret written as $TRITON_ADMIN_KEY
    output: str  # perf_analyzer's own output
    seconds: float
    table: object = None  # pandas DataFrame, one row per load level
    extra: dict = field(default_factory=dict)  # columns run_line() adds to row
    stats: dict = field(default_factory=dict)  # triton_stats.stats_delta() of the run
    utilisation: list = field(default_factory=list)  # samples over time: {t_s, gpu0_util_pct, ..}
    served_config: dict = field(default_factory=dict)  # the model's config as Triton served it

    @property
    def row(self) -> dict:
        """The (last) load level as a dict, with what run_line() added."""
        return {**self.table.iloc[-1].to_dict(), **self.extra}

    @property
    def windows(self) -> list[dict]:
        return output.parse_windows(self.output)

    @property
    def throughput(self):
        """Inferences per second, with the lowest and highest of the windows perf_analyzer judged
        (its last three: the first ones of a run may still be warming up) as its interval."""
        from servelab.claims import Measured

        values = [w["throughput_infer_s"] for w in self.windows][-3:]
        reported = self.row["throughput_infer_s"]
        return Measured.from_windows(values, reported) if values else Measured.exact(reported)

    def measured(self, column: str):
        """Any other column of the row, with the relative spread of the throughput windows."""
        from servelab.claims import Measured

        return Measured.exact(self.row[column]).with_spread_of(self.throughput)
