"""Triton Model Analyzer's results, read: every measurement, the best per objective, the Pareto
front, and notebook 7's hand-tuned result beside them.

Introduced in notebook 8.

    from servelab import model_analyzer as ma
    report = ma.load("results/going_further/model_analyzer")   # what the search wrote
    report.table                          # one row per (configuration, concurrency), times in ms
    ma.best_per_objective(report.table, p99_budget_ms=100)      # the configuration to deploy
    ma.pareto_front(report.table)         # throughput vs p99: the points nothing beats on both
    ma.plot(report.table, 100)            # every point, the front, the budget
    hand = ma.hand_tuned("results/hardware", 100)   # notebook 7's best under the budget, or None
    ma.comparison(report.table, 100, hand)           # both, with served/limit
    ma.search_against_hand("8.6", report, 100, hand, guess)  # the claims, your guess beside

The search itself is a command, because it starts servers (local mode: one tritonserver per
configuration) or reloads a model on the running one (Docker): `python -m labstack.model_analyzer`
(labstack/model_analyzer.py says how it runs Model Analyzer 1.44.0 with the lab's binaries).
It writes, under its --workdir: search.json (what it searched, how long it took),
export/results/metrics-model-inference.csv (Model Analyzer's own table), its summary report and
the variants' config.pbtxt files (report.variant_config(name) reads one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from servelab import claims
from servelab.claims import Prediction

# Model Analyzer's CSV column titles -> short names (times in ms, throughput in infer/s)
COLUMNS = {
    "Model": "model",
    "Model Config Path": "config",
    "Batch": "batch",
    "Concurrency": "concurrency",
    "Instance Group": "instance_group",
    "Max Batch Size": "max_batch_size",
    "Satisfies Constraints": "satisfies_constraints",
    "Throughput (infer/sec)": "throughput_infer_s",
    "p95 Latency (ms)": "p95_ms",
    "p99 Latency (ms)": "p99_ms",
    "Server Queue time (ms)": "server_queue_ms",
    "Server Compute Infer time (ms)": "server_compute_infer_ms",
}
RESULTS_CSV = Path("export") / "results" / "metrics-model-inference.csv"
SHOWN = [
    "variant",
    "concurrency",
    "instance_group",
    "max_batch_size",
    "throughput_infer_s",
    "p95_ms",
    "p99_ms",
    "server_queue_ms",
    "server_compute_infer_ms",
]


def read_results(path: Path | str):
    """Model Analyzer's metrics-model-inference.csv -> DataFrame, short column names, one row per
    (configuration, concurrency); `variant` is the configuration's name (its folder)."""
    import pandas as pd

    raw = pd.read_csv(path)
    table = raw.rename(columns={c: COLUMNS.get(c.strip(), c.strip()) for c in raw.columns})
    if "config" in table:
        table.insert(0, "variant", table["config"].astype(str))
    if "satisfies_constraints" in table:
        flag = table["satisfies_constraints"].astype(str).str.lower()
        table["satisfies_constraints"] = flag.isin(["yes", "true", "1"])
    return table


@dataclass
class Report:
    workdir: Path
    table: object  # pandas DataFrame (read_results)
    search: dict  # search.json: the space, the budget, the launch mode, seconds, the command

    @property
    def summary_report(self) -> Path | None:
        """Model Analyzer's summary (HTML here: its PDF needs wkhtmltopdf), with its own plot."""
        found = sorted((self.workdir / "export").glob("reports/summaries/*/result_summary.*"))
        return found[0] if found else None

    def variant_config(self, variant: str) -> str:
        """The config.pbtxt Model Analyzer wrote for one variant (what you would deploy)."""
        path = self.workdir / "output_model_repository" / variant / "config.pbtxt"
        return path.read_text()


def load(workdir: Path | str) -> Report:
    """What `python -m labstack.model_analyzer --workdir WORKDIR` left there."""
    workdir = Path(workdir)
    csv = workdir / RESULTS_CSV
    if not csv.is_file():
        raise FileNotFoundError(
            f"{csv} is missing: run the search first (python -m labstack.model_analyzer "
            f"--workdir {workdir}); its log is {workdir / 'model_analyzer.log'}"
        )
    search_json = workdir / "search.json"
    search = json.loads(search_json.read_text()) if search_json.is_file() else {}
    return Report(workdir, read_results(csv), search)


def instances(table):
    """The instance count of each row ('2:CPU' or '1:GPU' in Model Analyzer's column)."""
    return table["instance_group"].astype(str).str.extract(r"(\d+)")[0].astype(int)


def best_per_objective(table, p99_budget_ms: float):
    """The best measured point under the p99 budget for each objective: highest throughput, lowest
    p99, and the fewest instances that still reach 90% of the best throughput (the frugal choice).
    Chosen from the measurements themselves (p99_ms <= budget), not from Model Analyzer's flag."""
    import pandas as pd

    within = table[table["p99_ms"] <= p99_budget_ms]
    if within.empty:
        return pd.DataFrame(columns=["objective", *table.columns])
    best = {
        "max throughput": within.loc[within["throughput_infer_s"].idxmax()],
        "min p99": within.loc[within["p99_ms"].idxmin()],
    }
    enough = within[within["throughput_infer_s"] >= 0.9 * within["throughput_infer_s"].max()]
    if "instance_group" in enough:
        ordered = enough.assign(_n=instances(enough)).sort_values(
            ["_n", "throughput_infer_s"], ascending=[True, False]
        )
        best["90% of max throughput, fewest instances"] = ordered.iloc[0].drop("_n")
    return pd.DataFrame([{"objective": name, **row.to_dict()} for name, row in best.items()])


def pareto_front(table):
    """The measurements that no other beats on both throughput (higher) and p99 (lower)."""
    ordered = table.sort_values(["p99_ms", "throughput_infer_s"], ascending=[True, False])
    front, best = [], -1.0
    for index, row in ordered.iterrows():
        if row["throughput_infer_s"] > best:
            front.append(index)
            best = row["throughput_infer_s"]
    return table.loc[front].sort_values("p99_ms")


def plot(table, p99_budget_ms: float, ax=None, hand_tuned: dict | None = None):
    """Throughput against p99 for every measurement, the Pareto front joined, the budget drawn;
    hand_tuned={"label": ..., "p99_ms": ..., "throughput_infer_s": ...} adds that point."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    for variant, rows in table.groupby("variant"):
        ax.scatter(rows["p99_ms"], rows["throughput_infer_s"], label=variant, s=30)
    front = pareto_front(table)
    ax.plot(front["p99_ms"], front["throughput_infer_s"], color="black", lw=1, label="Pareto front")
    ax.axvline(p99_budget_ms, color="red", ls="--", lw=1, label=f"p99 budget {p99_budget_ms:g} ms")
    if hand_tuned:
        ax.scatter(
            [hand_tuned["p99_ms"]],
            [hand_tuned["throughput_infer_s"]],
            marker="*",
            s=160,
            color="black",
            label=hand_tuned["label"],
        )
    ax.set_xlabel("p99 latency (ms)")
    ax.set_ylabel("throughput (infer/s)")
    ax.legend(fontsize=7)
    return ax


# ---------------------------------------------------------------- against notebook 7's hand tuning


def hand_tuned(hardware_dir: Path | str, p99_budget_ms: float) -> dict | None:
    """Notebook 7's best run under the p99 budget, with its served/limit, or None when notebook 7
    has not been run here (its served_over_limit.json and summary.csv in hardware_dir).

    The interval `lo`..`hi` is the spread of notebook 7's repeats of its best configuration (7.8),
    relative, applied to this run: how far the same configuration moved between runs."""
    import pandas as pd

    folder = Path(hardware_dir)
    summary_json, summary_csv = folder / "served_over_limit.json", folder / "summary.csv"
    if not (summary_json.is_file() and summary_csv.is_file()):
        return None
    record = json.loads(summary_json.read_text())
    summary = pd.read_csv(summary_csv)  # notebook 7's table: one row per run
    within = summary[summary["p99_ms"] <= p99_budget_ms]
    if within.empty:
        return {"run": None, "limit": record["limit"], "device": record.get("device")}
    best = within.loc[within["throughput_infer_s"].idxmax()]
    limit = float(record["limit"]["images_per_s"])
    repeats = [float(r) for r in record.get("repeats_served_over_limit", [])]
    median = sorted(repeats)[len(repeats) // 2] if repeats else 0.0
    down = (median - min(repeats)) / median if median else 0.0
    up = (max(repeats) - median) / median if median else 0.0
    served = float(best["throughput_infer_s"])
    return {
        "run": best["run"],
        "command": best.get("command", ""),
        "throughput_infer_s": served,
        "p99_ms": float(best["p99_ms"]),
        "served_over_limit": served / limit,
        "lo": served / limit * (1 - down),
        "hi": served / limit * (1 + up),
        "limit": record["limit"],
        "device": record.get("device"),
    }


def comparison(table, p99_budget_ms: float, hand: dict | None):
    """Model Analyzer's best per objective beside notebook 7's best under the same budget:
    throughput, p99 and served/limit (the limit of notebook 7, when there is one)."""
    import pandas as pd

    limit = float(hand["limit"]["images_per_s"]) if hand else None
    rows = []
    if hand and hand.get("run"):
        rows.append(
            {
                "who": "notebook 7, hand-tuned",
                "configuration": hand["run"],
                "throughput_infer_s": hand["throughput_infer_s"],
                "p99_ms": hand["p99_ms"],
            }
        )
    for _, row in best_per_objective(table, p99_budget_ms).iterrows():
        rows.append(
            {
                "who": f"Model Analyzer, {row['objective']}",
                "configuration": f"{row['variant']} ({row['instance_group']}, max batch "
                f"{row['max_batch_size']}, c{row['concurrency']})",
                "throughput_infer_s": row["throughput_infer_s"],
                "p99_ms": row["p99_ms"],
            }
        )
    out = pd.DataFrame(rows, columns=["who", "configuration", "throughput_infer_s", "p99_ms"])
    if limit:
        out["served_over_limit"] = out["throughput_infer_s"] / limit
    return out


def say_what_is_missing(hand: dict | None, table, p99_budget_ms: float) -> None:
    """Print what comparison() cannot show: no notebook 7 here, no run of it within the budget, or
    no measurement of the search within it."""
    if hand is None:
        print(
            "Notebook 7's summary (results/hardware/served_over_limit.json) is not there: notebook "
            "7 has not been run with this results folder, so there is no hand-tuned result and no "
            "limit to compare with. Run notebook 7, then this section again."
        )
    elif hand["run"] is None:
        print(
            f"No run of notebook 7 kept p99 under {p99_budget_ms:g} ms: it has no answer to "
            "compare with."
        )
    if best_per_objective(table, p99_budget_ms).empty:
        print(
            f"None of the search's measurements kept p99 under {p99_budget_ms:g} ms on this "
            "machine: it has no configuration to recommend within the budget (see the Pareto "
            "front below)."
        )


def search_against_hand(
    step: str, report: Report, p99_budget_ms: float, hand: dict | None, predicted: Prediction
) -> None:
    """8.6's claims (`step`, as the notebook names it): the search's best under the budget
    against notebook 7's (served/limit, with notebook 7's run-to-run spread; your prediction of
    it beside it), its lowest p99 against notebook 7's, and every configuration measured at every
    load."""
    best = best_per_objective(report.table, p99_budget_ms)
    if hand and hand["run"] and not best.empty:
        limit = hand["limit"]["images_per_s"]
        found = claims.Measured.exact(best.iloc[0]["throughput_infer_s"] / limit)
        spread = "spread of notebook 7's repeats of its best"
        theirs = claims.Measured(hand["served_over_limit"], hand["lo"], hand["hi"], spread)
        claims.compare_prediction(predicted, found / theirs)
        claims.at_least(
            f"{step}: the search's best under the budget serves at least notebook 7's best "
            "under it (served/limit)",
            found / theirs,
            1.0,
            {"search": best.iloc[0]["variant"], "notebook 7": hand["run"]},
            note="the interval: notebook 7's run-to-run spread; the search ran once",
        )
        claims.at_most(
            f"{step}: the search found a lower p99 than notebook 7's best under the budget",
            best.iloc[1]["p99_ms"] / hand["p99_ms"],
            1.0,
        )
    else:
        why = "no run of notebook 7 or of the search kept p99 under the budget"
        why = "notebook 7 has not run here" if hand is None else why
        claims.not_checkable(f"{step}: the search against notebook 7's hand tuning", why)
    claims.at_least(
        f"{step}: the search measured every configuration at every load",
        len(report.table),
        report.search["points"],
    )
