"""An HTTP load run as plain files in a results bundle, and back: what the review pass reads.

Introduced in notebook 4 (loadgen.run keeps each run this way in the measure pass).

    requests.csv   one row per request: when it left, its latency, status, the Server-Timing parts
    run.json       the run's settings and timing (its label, senders, wall time, URL, rate)
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from servelab.passes.bundle import write_json


def write(df: pd.DataFrame, folder: Path) -> None:
    df.to_csv(folder / "requests.csv", index=False)
    write_json(folder / "run.json", dict(df.attrs))


def read(folder: Path) -> pd.DataFrame:
    df = pd.read_csv(folder / "requests.csv", float_precision="round_trip")
    if "status" in df and not pd.api.types.is_numeric_dtype(df["status"]):
        # 200 beside "error: ...": the codes are numbers again, as the run had them
        codes = [int(s) if str(s).isdigit() else s for s in df["status"]]
        df["status"] = pd.Series(codes, index=df.index, dtype=object)
    df.attrs.update(json.loads((folder / "run.json").read_text()))
    return df
