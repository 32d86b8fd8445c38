"""A perf_analyzer run as plain files in a results bundle, and back: what the review pass reads.

Introduced in notebook 6 (perf.run_line keeps each run this way in the measure pass).

    rows.csv            perf_analyzer's rows, as parsed (times in ms), one per load level
    windows.csv         its measurement windows (throughput, mean latency): the claims' intervals
    output.txt          perf_analyzer's own output, as it printed it
    utilisation.csv     Triton's utilisation sampled during the run
    stats.json          Triton's statistics of the run (what changed between before and after)
    served_config.json  the model's config as Triton served it
    run.json            the run's name, your line, the command that ran, and the row's other
                        columns (mode, the laws, the batch counts)

Read back, a run is the same perf.Run: your line is read once from run.json, and every number is
the one the measure pass computed (floats as written, batch sizes as numbers).
"""

from __future__ import annotations

import json
from pathlib import Path

from servelab.passes import Stop
from servelab.passes.bundle import write_json
from servelab.perf import flags
from servelab.perf.line import Line
from servelab.perf.result import Run

# what decides what a run measured: a line asking something else is not this run
IDENTITY = ("-m", "-b", "--concurrency-range", "--request-rate-range", "--request-distribution")


def write(run: Run, folder: Path) -> None:
    import pandas as pd

    run.table.to_csv(folder / "rows.csv", index=False)
    pd.DataFrame(run.windows).to_csv(folder / "windows.csv", index=False)
    (folder / "output.txt").write_text(run.output)
    pd.DataFrame(run.utilisation).to_csv(folder / "utilisation.csv", index=False)
    write_json(folder / "stats.json", run.stats)
    write_json(folder / "served_config.json", run.served_config)
    write_json(
        folder / "run.json",
        {
            "name": run.name,
            "line": str(run.line),
            "command": run.command,
            "seconds": run.seconds,
            "extra": run.extra,
            **({"steps": run.steps.to_dict("records")} if hasattr(run, "steps") else {}),
        },
    )


def read(folder: Path) -> Run:
    import pandas as pd

    meta = json.loads((folder / "run.json").read_text())
    stats = _batch_sizes(json.loads((folder / "stats.json").read_text()))
    utilisation = _records(folder / "utilisation.csv")
    run = Run(
        meta["name"],
        Line.read(meta["line"]),
        meta["command"],
        (folder / "output.txt").read_text(),
        meta["seconds"],
        pd.read_csv(folder / "rows.csv", float_precision="round_trip"),
        _batch_sizes(meta["extra"]),
        stats,
        utilisation,
        json.loads((folder / "served_config.json").read_text()),
    )
    if "steps" in meta:
        run.steps = pd.DataFrame(meta["steps"])
    return run


def _records(path: Path) -> list[dict]:
    import pandas as pd

    try:
        return pd.read_csv(path, float_precision="round_trip").to_dict("records")
    except pd.errors.EmptyDataError:  # no sample was taken
        return []


def _batch_sizes(data: dict) -> dict:
    """JSON keeps a dict's keys as text: the batch counts' keys are batch sizes, numbers again."""
    if isinstance(data.get("batch_executions"), dict):
        data["batch_executions"] = {int(k): v for k, v in data["batch_executions"].items()}
    return data


def same_run(run: Run, line: Line) -> Run:
    """The bundle's run, if it measured what `line` asks (its model, batch and load); Stop else."""
    asked = {f: line.value(f) for f in IDENTITY}
    kept = {f: run.line.value(f) for f in IDENTITY}
    if all(flags.same(f, kept[f], asked[f] or "") or kept[f] == asked[f] for f in IDENTITY):
        return run
    raise Stop(
        f"the bundle's run {run.name!r} measured `{run.line}`, this notebook now asks `{line}`: "
        "the review pass reads what the measure pass ran."
    )
