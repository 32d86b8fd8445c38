"""Served/limit over separately started servers: notebook 7's best configuration, one fresh start
of Triton per invocation (more while LAB_STABILITY_DEADLINE_S allows), each start appended to
DIR/results/stability/starts.json with what its executions spent their time on. Run it once per
device call until enough starts are recorded:

    python3 maintainers/reference/run_reference.py --out DIR --parts stability   # one more start
    LAB_STABILITY_DEADLINE_S=540 ...   # more starts while the longest so far fits in 540 s
    LAB_STABILITY_BEST=FILE ...   # the best configuration's record (default: DIR's notebook 7)
    LAB_STABILITY_LIMIT=54918.5 ...   # the limit to divide by (default: that record's)
    LAB_STABILITY_CHANGE=direct_inputs=on ...   # the configuration with one change, its own file

The spread of a served/limit figure lies between server starts (which instance lands where, the
batcher's rhythm, the compile), not between repeats inside one start. Each start: tritonserver
alone, food_classifier_tuned in the best run's full config.pbtxt loaded at the server's start (its
only load, its CUDA graphs captured there), one counted run with the best run's perf_analyzer line
at WINDOW_MS windows, the server stopped. Until issue 54 a start was the whole lab stack (FastAPI,
Flask, notebook 6's models beside it) with the best config loaded after it and an uncounted
warm-up run before the counted one, 191-277 s a start on the H100. Triton alone, with its one
load, is what execution_costs.py's starts measured (docs/results/h100/execution_costs/); there
the warm-up runs served 7-8 % more than the counted runs after them (33,420 and 30,759 against
30,941 and 28,751 infer/s): a load that captures every graph leaves nothing to warm, and a start
without it is 15-20 s shorter. A start is then its load (64-99 s for notebook 7's compiled model
on the H200, 2026-11-28) and about 40 s more.

Each start also records where the served/limit gap goes (execution_costs.measure: the stubs' phase
clock, Triton's per-execution statistics, the cores each process kept busy): served/limit is the
GPU's busy share times what it served per busy second over the limit (gap_parts()), and each
execution's cycle splits into the Python backend's own time between two executions, reading the
inputs, stacking them, the device (copy, graph, the logits back) and building the responses.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path

WINDOW_MS = 3000  # notebook 7's reference windows; 5 s did not finish inside one call (11-24)
PHASES = ("between", "inputs", "stage", "device", "responses")  # stub_profile's, in cycle order


def best_record(out: Path) -> Path:
    return Path(
        os.environ.get("LAB_STABILITY_BEST")
        or out / "results" / "hardware" / "served_over_limit.json"
    )


def change() -> dict[str, str]:
    """LAB_STABILITY_CHANGE, "key=value[,key=value]": parameters of the tuned model set on top of
    the best configuration (e.g. direct_inputs=on)."""
    text = os.environ.get("LAB_STABILITY_CHANGE", "").strip()
    return dict(item.split("=", 1) for item in text.split(",") if item) if text else {}


def record_path(out: Path, changed: dict | None = None) -> Path:
    """results/stability/starts.json for the best configuration as it is; a change's starts go to
    a file of their own (starts_direct_inputs-on.json), so no median mixes the two."""
    changed = change() if changed is None else changed
    name = "_".join(f"{k}-{v}" for k, v in changed.items())
    return out / "results" / "stability" / (f"starts_{name}.json" if name else "starts.json")


def config_with(text: str, changed: dict, profile_dir: Path) -> str:
    """The best config.pbtxt with each changed parameter set and the stubs' phase clock on."""
    for key, value in {**changed, "profile_dir": str(profile_dir)}.items():
        line = f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}'
        pattern = rf'parameters \{{ key: "{re.escape(key)}" value \{{ string_value: "[^"]*" \}} \}}'
        text, found = re.subn(pattern, line, text)
        if not found:
            text = text.rstrip("\n") + "\n" + line + "\n"
    return text


def run_one_start(out: Path) -> dict:
    """One more fresh start; returns its entry (with "error" if it failed) after saving it."""
    from maintainers.reference import execution_costs
    from servelab import three_way

    source = best_record(out)
    best = json.loads(source.read_text())
    changed = change()
    path = record_path(out, changed)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    limit = os.environ.get("LAB_STABILITY_LIMIT")
    record = load(out, changed) or {
        "best": best["best"],
        "best_record": str(source),
        "command": best["command"],
        "limit_images_per_s": float(limit) if limit else best["limit"]["images_per_s"],
        "limit_source": "LAB_STABILITY_LIMIT" if limit else f"{source.name}: limit",
        "change": changed,
        "window_ms": WINDOW_MS,
        "starts": [],
    }
    entry = {"start": len(record["starts"]) + 1, "started": time.strftime("%F %T %Z")}
    tag = f"start_{entry['start']}" + ("_" + path.stem.split("_", 1)[1] if changed else "")
    t0, server = time.time(), None
    try:
        profile_dir = Path(f"/tmp/stub_profile/{tag}_{int(time.time())}")
        config = config_with(best["best_config"], changed, profile_dir)
        line = best["command"]
        if not _gpu():  # a check of this part on a CPU: the configuration's CPU form, 16 clients
            config = three_way.cpu_form(config)
            line = re.sub(r"--concurrency-range \S+", "--concurrency-range 16", line)
        server = execution_costs.Server(Path(f"/tmp/stability_{tag}_{int(t0)}"), config)
        entry["load_s"] = round(server.start_s, 1)  # the server answers once its model loaded
        target = server.grpc if " -i grpc" in line else server.url.split("://")[-1]
        line = re.sub(r"-u \S+", f"-u {target}", line)
        row = execution_costs.measure(
            server, tag, folder, profile_dir, spy=False, line=line, warm_up=False
        )
        entry.update(
            warm_up_infer_s=row.get("warm_up_infer_s"),
            infer_s=row["infer_s"],
            served_over_limit=row["infer_s"] / record["limit_images_per_s"],
            mode=row["run"].get("mode"),
            parts=gap_parts(row, record["limit_images_per_s"]),
        )
    except Exception as exc:  # noqa: BLE001 - a failed start is recorded as such, with its reason
        entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        if server is not None:
            server.stop(folder, tag)
    entry["seconds"] = round(time.time() - t0)
    record["starts"].append(entry)
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"fresh start {entry['start']}: {entry}", flush=True)
    return entry


def _gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def gap_parts(row: dict, limit: float) -> dict:
    """What one start's served/limit is made of (execution_costs.measure's row): the GPU's busy
    share during the counted run (Triton's metrics) times the images it served per busy second
    over the limit, the executions' batch, and each execution's cycle, ms, by part."""
    run, prof = row["run"], row["stub_profile"]
    busy = (run.get("gpu0_util_pct") or 0.0) / 100
    ms = prof["ms_per_execution"]
    return {
        "gpu_busy": round(busy, 3),
        "served_per_busy_s_over_limit": round(row["infer_s"] / busy / limit, 3) if busy else None,
        "mean_batch": round(prof["mean_batch"], 1),
        "mean_padded_batch": round(prof["mean_padded_batch"], 1),
        "instances_busy_U": run.get("busy_U"),
        "cycle_ms": {k: round(ms.get(k, 0.0), 2) for k in PHASES},
        "gpu_ms": {k: round(v, 2) for k, v in prof["gpu_ms_per_execution"].items()},
        "triton_ms": {
            k.removesuffix("_ms"): round(v, 2)
            for k, v in row["per_execution_ms"].items()
            if k.endswith("_ms") and v is not None
        },
        "cores": row["cores_used"],
        "direct_batches": prof.get("direct_batches", 0),
        "executions": prof["executions"],
    }


def load(out: Path, changed: dict | None = None) -> dict | None:
    """The starts recorded so far of the configuration with `changed` (default: this run's,
    LAB_STABILITY_CHANGE; {}: the best configuration as it is)."""
    path = record_path(out, changed)
    return json.loads(path.read_text()) if path.exists() else None


def _changes(out: Path) -> list[dict]:
    """The records of changed configurations in DIR, each a file of its own."""
    folder = out / "results" / "stability"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("starts_*.json"))]


def _ratios(record: dict) -> list[float]:
    return [s["served_over_limit"] for s in record["starts"] if "served_over_limit" in s]


def report_lines(out: Path, goal: float) -> list[str]:
    """The page's section: the line over the starts that measured, each start, the failures; a
    changed configuration's starts below, with their own line."""
    record = load(out, {})
    if not record:
        return []
    lines = ["## Served / limit over separately started servers", ""]
    lines += _record_lines(record, goal)
    for other in _changes(out):
        shown = ", ".join(f"{k}: {v}" for k, v in other["change"].items())
        lines += [f"### The same with one change: {shown}", ""]
        lines += _record_lines(other, goal)
        if _ratios(record) and _ratios(other):
            ratio = statistics.median(_ratios(other)) / statistics.median(_ratios(record))
            lines += [f"Median against the configuration as it is: {ratio:.3f}x.", ""]
    return lines


def _record_lines(record: dict, goal: float) -> list[str]:
    ratios = _ratios(record)
    lines = []
    if ratios:
        median = statistics.median(ratios)
        lines += [
            f"**served/limit over {len(ratios)} separately started servers: median {median:.3f}, "
            f"min {min(ratios):.3f}, max {max(ratios):.3f}** (goal: median >= {goal:.2f}: "
            f"{'holds' if median >= goal and len(ratios) >= 3 else 'does not hold yet'}"
            + ("" if len(ratios) >= 3 else f", {len(ratios)} of the 3 starts it needs")
            + ")",
            "",
        ]
    lines += [
        f"Configuration: {record['best']} (from `{Path(record['best_record']).name}`); limit "
        f"{record['limit_images_per_s']:.0f} images/s"
        + (f" ({record['limit_source']})" if "limit_source" in record else "")
        + f"; each start's counted run at {record['window_ms'] / 1000:g} s windows "
        + (
            "after an uncounted warm-up run."
            if any(s.get("warm_up_infer_s") is not None for s in record["starts"])
            else "with no warm-up run before it (the start's one load captured the CUDA graphs)."
        ),
        "",
        "| start | began | load s | warm-up infer/s | infer/s | served/limit | whole start s | "
        "note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in record["starts"]:
        cells = [_cell(s.get(k, "")) for k in ("load_s", "warm_up_infer_s", "infer_s")]
        ratio = f"{s['served_over_limit']:.3f}" if "served_over_limit" in s else ""
        note = s.get("error") or s.get("mode", "")
        lines.append(
            f"| {s['start']} | {s['started']} | {' | '.join(cells)} | {ratio} | {s['seconds']} "
            f"| {note} |"
        )
    parted = [s for s in record["starts"] if "parts" in s]
    if parted:
        lines += ["", *_parts_lines(parted)]
    return [*lines, ""]


def _cell(value) -> str:
    """A start's figure in its table: whole numbers, "-" for one it did not measure."""
    if isinstance(value, float):
        return f"{value:.0f}"
    return "-" if value is None else str(value)


def _parts_lines(starts: list[dict]) -> list[str]:
    """Where each start's gap went: the GPU's busy share, its rate when busy, an execution's
    cycle by part (execution_costs.py's, docs/results/h100/execution_costs/)."""
    lines = [
        "Where the gap goes: served/limit = GPU busy x (served per busy second / limit); each "
        "execution's cycle, ms (the stubs' phase clock):",
        "",
        "| start | GPU busy | served per busy s / limit | mean batch (padded) | between "
        "executions | inputs | stacking | device | responses | GPU by events: copy / graph | "
        "cores: tritonserver / stubs / other |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in starts:
        p = s["parts"]
        c, g, cores = p["cycle_ms"], p["gpu_ms"], p["cores"]
        lines.append(
            f"| {s['start']} | {p['gpu_busy']:.3f} | {p['served_per_busy_s_over_limit']} | "
            f"{p['mean_batch']} ({p['mean_padded_batch']}) | {c['between']} | {c['inputs']} | "
            f"{c['stage']} | {c['device']} | {c['responses']} | {g['copy']} / {g['graph']} | "
            f"{cores.get('tritonserver')} / {cores.get('stubs')} / {cores.get('other')} |"
        )
    return lines
