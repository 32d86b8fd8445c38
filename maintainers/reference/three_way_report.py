"""The three-way comparison's page: OUT/three_way.json (every figure the page shows, computed from
the run's files) and OUT/README.md (its tables, then OUT/notes.md verbatim: the hand-written part).
`python3 maintainers/reference/three_way.py OUT --parts report` rewrites both from the files; the
tests check that a committed page is what its files give (tests/test_three_way_page.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from servelab import three_way  # noqa: E402

NAMES = three_way.NAMES


def figures(out: Path) -> dict:
    """Every figure of the page, from the run's files."""
    setup = json.loads((out / "setup.json").read_text())
    setting = three_way.Setting(**setup["setting"])
    answers = json.loads((out / "answers.json").read_text())
    ladder = pd.read_csv(out / "ladder.csv")
    at_objective = {
        way: three_way.at_objective(steps.to_dict("records"), setting)
        for way, steps in ladder.groupby("way", sort=False)
    }
    pooled = pd.read_csv(out / "fixed_pooled.csv").set_index("way")
    fixed = pd.read_csv(out / "fixed.csv")
    rounds = {
        way: [round(x, 1) for x in g.sort_values("round")["p95_ms"]]
        for way, g in fixed.groupby("way")
    }
    comparisons = {}
    names = list(pooled.index)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for column in ("median", "p95"):
                comparisons[f"{a} vs {b}, {column}"] = three_way.compare(
                    pooled.loc[a].to_dict(), pooled.loc[b].to_dict(), column
                )
    sequential = pd.read_csv(out / "sequential.csv").set_index("way")
    cpu = pd.read_csv(out / "cpu.csv")
    own = cpu[cpu.apply(lambda r: r["group"].startswith(f"{r['way']}:"), axis=1)]
    cpu_per_request = {
        way: {g: round(v, 2) for g, v in rows.groupby("group")["cpu_ms_per_request"].mean().items()}
        for way, rows in own.groupby("way")
    }
    generator = cpu[cpu["group"] == "generator"].groupby("way")["cpu_ms_per_request"].mean()
    machine = cpu[cpu["group"] == "machine"].groupby("way")["cores"].mean()
    perf = json.loads((out / "perf.json").read_text()) if (out / "perf.json").exists() else {}
    progress = json.loads((out / "progress.json").read_text())
    batch_gain = {
        batched: {
            "without": plain,
            **three_way.rate_ratio(at_objective[batched], at_objective[plain]),
        }
        for batched, plain in three_way.BATCHED.items()
        if batched in at_objective and plain in at_objective
    }
    rate_ratios = {
        way: three_way.rate_ratio(at_objective[way], at_objective["triton"])
        for way in at_objective
        if way != "triton" and "triton" in at_objective
    }
    return {
        "setup": setup,
        "answers": answers,
        "at_objective": at_objective,
        "ladder": ladder.to_dict("records"),
        "fixed_pooled": pooled.reset_index().to_dict("records"),
        "fixed_rounds_p95_ms": rounds,
        "comparisons": comparisons,
        "sequential": sequential.reset_index().to_dict("records"),
        "cpu_ms_per_request": cpu_per_request,
        "generator_cpu_ms_per_request": {w: round(v, 2) for w, v in generator.items()},
        "machine_cores_busy": {w: round(v, 2) for w, v in machine.items()},
        "batch_gain": batch_gain,
        "rate_ratios": rate_ratios,
        "latency_ratios": latency_ratios(out, list(pooled.index)),
        "configurations": configurations(setup),
        "perf": perf,
        "parts_s": {p: d["seconds"] for p, d in progress.get("done", {}).items() if p != "report"},
        "restarts": progress.get("restarts", 0),
    }


def requests_file(out: Path, kind: str, way: str) -> Path:
    """A part's requests of one way (kind "ladder" or "fixed"): the CSV the run wrote, or the
    same gzipped (a committed page keeps its large request files so: `gzip -n`)."""
    plain = out / f"{kind}_requests_{way}.csv"
    return plain if plain.exists() else plain.with_name(plain.name + ".gz")


def latency_ratios(out: Path, names: list[str]) -> dict:
    """At the fixed rate: each batching way against the same way without, and every other way
    against Triton with notebook 7's best configuration; median and p95, each ratio with its
    bootstrap interval (three_way.latency_ratio), from the rounds' pooled requests."""

    def answered(way: str):
        df = pd.read_csv(requests_file(out, "fixed", way), low_memory=False)
        return df[df["status"].astype(str) == "200"]["latency_ms"].dropna().to_numpy()

    pairs = [(a, b) for a, b in three_way.BATCHED.items() if a in names and b in names]
    if "triton" in names:
        pairs += [(w, "triton") for w in names if w != "triton"]
    samples = {w: answered(w) for w in {x for pair in pairs for x in pair}}
    return {
        f"{a} / {b}": {
            stat: {
                k: round(v, 3)
                for k, v in three_way.latency_ratio(samples[a], samples[b], stat).items()
            }
            for stat in ("median", "p95")
        }
        for a, b in pairs
    }


def configurations(setup: dict) -> dict:
    """Each way's configuration, in words, from setup.json (this run's format or the first H200
    run's, which had no batching ways)."""
    out = {}
    triton = setup.get("triton", {"configs": {}})
    configs = triton.get("configs")
    if configs is None:  # the first H200 run's setup.json
        configs = {
            three_way.TRITON_MODEL: triton["config"],
            three_way.ONNX_MODEL: triton["onnx_config"],
        }
    for way, model in (
        ("triton", three_way.TRITON_MODEL),
        ("triton_onnx", three_way.ONNX_MODEL),
        ("triton_onnx_batch", three_way.ONNX_BATCH_MODEL),
    ):
        if model in configs:
            out[way] = f"`{model}`: " + _triton_config(configs[model])
    ray = setup.get("ray")
    if ray is None:  # a run of other ways only (--ways)
        apps = {}
    else:
        apps = ray.get("apps") or {
            "ray": {
                "num_replicas": ray["replicas"],
                "max_ongoing_requests": ray["max_ongoing_requests"],
                "ray_actor_options": {
                    "num_cpus": 1,
                    **({"num_gpus": round(1 / ray["replicas"], 4)} if ray["gpus"] else {}),
                },
                "deployment": "FoodClassifier",
            }
        }
    for way, app in apps.items():
        batch = app.get("batch")
        out[way] = (
            f"`{app['deployment']}`: {app['num_replicas']} replicas, max_ongoing_requests "
            f"{app['max_ongoing_requests']}, ray_actor_options {app['ray_actor_options']}, "
            + (
                f"@serve.batch max_batch_size {batch['max_batch_size']}, batch_wait_timeout_s "
                f"{batch['batch_wait_timeout_s']:g}"
                if batch
                else "no batching"
            )
            + "; ONNX Runtime, one thread"
        )
    fastapi = setup.get("fastapi")
    if fastapi is None:
        return out
    health = fastapi["health"]
    out["fastapi"] = (
        f"uvicorn, {fastapi['workers']} worker process(es), ONNX Runtime on "
        f"{health.get('device')} with {health.get('threads')} thread(s) each, one request at a "
        "time per worker (no batching)"
    )
    return out


def _triton_config(text: str) -> str:
    """A Triton config.pbtxt in a line: instances, where, max batch, the batcher, parameters."""
    import re

    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # no comments

    def field(pattern: str) -> str | None:
        found = re.search(pattern, text)
        return found.group(1) if found else None

    count, kind = field(r"count: (\d+)"), field(r"kind: (KIND_\w+)")
    delay = field(r"dynamic_batching \{[^}]*max_queue_delay_microseconds: (\d+)")
    batching = (
        f"dynamic batching, {delay} us"
        if delay
        else ("dynamic batching" if "dynamic_batching" in text else "no batching")
    )
    params = re.findall(
        r'key: "(precision|cuda_graphs|compile)" value \{ string_value: "(\w+)"', text
    )
    shown = ", ".join(f"{k} {v}" for k, v in params)
    largest = field(r"max_batch_size: (\d+)")
    return f"{count} x {kind}, max_batch_size {largest}, {batching}" + (
        f", {shown}" if shown else ""
    )


def _ratio(r: dict) -> str:
    return f"{r['ratio']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]"


def _bracket(g: dict) -> str:
    if g["ratio"] is None:
        return "the second held no rate"
    if g["lo"] is None and g["hi"] is None:
        return f"{g['ratio']:.2f} (no end known)"
    if g["lo"] is None:  # the second way's ladder has no known upper end
        return f"{g['ratio']:.2f} (at most {g['hi']:.2f})"
    hi = "open" if g["hi"] is None else f"{g['hi']:.2f}"
    return f"{g['ratio']:.2f} (between {g['lo']:.2f} and {hi})"


def _interval(row: dict, column: str) -> str:
    return f"{row[f'{column}_ms']:.1f} [{row[f'{column}_lo_ms']:.1f}, {row[f'{column}_hi_ms']:.1f}]"


def markdown(f: dict) -> str:
    s, m = f["setup"]["setting"], f["setup"]["machine"]
    slack = three_way.generator_slack_ms(s["objective_ms"])
    on = "CPU only" if m["gpu"] == "none" else m["gpu"]
    lines = [
        f"# Triton, Ray Serve and FastAPI: the same model, the same load ({on}, "
        f"{m['cores']} cores)",
        "",
        "Generated by `maintainers/reference/three_way.py` (`--parts report`) from the files "
        "beside it;",
        "what each part measured and why: `servelab/three_way.py`. How it ran: the notes below.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, GPU: {m['gpu']}; load average at the start "
        f"{' / '.join(str(x) for x in m['load_average_1_5_15'])} (1 / 5 / 15 min). Setting "
        f"`{s['name']}`: latency objective p95 <= {s['objective_ms']:g} ms; ladder from "
        f"{s['start_rps']:g}/s, x{s['factor']:g} a step, {s['step_s']:g} s each; fixed rate "
        f"{s['fixed_rps']:g}/s, {s['rounds']} rounds of {s['fixed_s']:g} s each, interleaved; "
        f"{s['senders']} load-generator process(es).",
        "",
        "## What each receives",
        "",
        "| way | request body | class answered |",
        "|---|---|---|",
    ]
    a = f["answers"]
    order = [w for w in three_way.ORDER if w in a["labels"]]
    for way in order:
        lines.append(f"| {NAMES[way]} | {a['receives'][way]} | {a['labels'][way]} |")
    lines += [
        "",
        f"The ways answered {'the same class' if a['agree'] else 'different classes'} for the "
        "photo.",
        "",
        "## How each was configured",
        "",
        "| way | configuration |",
        "|---|---|",
    ]
    lines += [
        f"| {NAMES[w]} | {f['configurations'][w]} |" for w in order if w in f["configurations"]
    ]
    lines += [
        "",
        f"## Throughput at the latency objective (p95 <= {s['objective_ms']:g} ms)",
        "",
        "| way | highest rate that held | served there | next rate tried | its verdict | "
        "against Triton (notebook 7's best): ratio (bracket) |",
        "|---|---|---|---|---|---|",
    ]
    for way in order:
        o = f["at_objective"][way]
        nxt = "-" if o["next_rps"] is None else f"{o['next_rps']:g}/s"
        ratio = _bracket(f["rate_ratios"][way]) if way in f["rate_ratios"] else "-"
        lines.append(
            f"| {NAMES[way]} | {o['held_rps']:g}/s | {o['served_rps']:.1f}/s | {nxt} | "
            f"{o['next_verdict']} | {ratio} |"
        )
    if f["batch_gain"]:
        lines += [
            "",
            "Batching against none, the same runtime and copies of the model (the ratio of the",
            "highest rates that held; the true ratio lies between the ends given, from each",
            "ladder's bracket):",
            "",
            "| with batching | without | rate held, ratio (bracket) |",
            "|---|---|---|",
        ]
        for batched, g in f["batch_gain"].items():
            lines.append(f"| {NAMES[batched]} | {NAMES[g['without']]} | {_bracket(g)} |")
    lines += [
        "",
        "A rate holds when the 95 % bootstrap interval of its p95 is under the objective, at",
        "least 90 % of what was offered was served and no request failed; the true figure lies",
        "between the rate that held and the next one tried. A step where the load generator sent",
        f"late (the 95th percentile of its delay over {slack:g} ms)",
        "measured the generator, not the server"
        + (
            " (a way whose next step did so has no known upper end: its ratios are bounded on "
            "one side only)."
            if any(o["next_verdict"] == "generator late" for o in f["at_objective"].values())
            else "."
        )
        + " Every step:",
        "",
        "| way | rate | served | p95 ms [95 % interval] | mean batch | sent late, p95 ms | "
        "verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in f["ladder"]:
        batch = row.get("mean_batch")
        batch = "-" if batch is None or batch != batch else f"{batch:.1f}"
        lines.append(
            f"| {NAMES[row['way']]} | {row['rate_rps']:g}/s | {row['served_rps']:.1f}/s | "
            f"{row['p95_ms']:.1f} [{row['p95_lo_ms']:.1f}, {row['p95_hi_ms']:.1f}] | {batch} | "
            f"{row['late_p95_ms']:.1f} | {row['verdict']} |"
        )
    lines += [
        "",
        "Mean batch: Triton's executions of the step (its statistics), Ray's batches as each",
        'request saw its own (`@serve.batch`); "-" where the way does not batch or the run',
        "did not record it.",
    ]
    lines += [
        "",
        f"## Latency at a fixed open-loop rate ({s['fixed_rps']:g}/s)",
        "",
        "| way | requests | median ms [95 % interval] | p95 ms [95 % interval] | "
        "p95 of each round |",
        "|---|---|---|---|---|",
    ]
    for row in f["fixed_pooled"]:
        rounds = ", ".join(f"{x:.1f}" for x in f["fixed_rounds_p95_ms"][row["way"]])
        lines.append(
            f"| {NAMES[row['way']]} | {row['requests']} | {_interval(row, 'median')} | "
            f"{_interval(row, 'p95')} | {rounds} |"
        )
    lines += ["", "By their intervals (first named against second):", ""]
    lines += [f"- {k}: {v}" for k, v in f["comparisons"].items()]
    if f["latency_ratios"]:
        lines += [
            "",
            "Ratios at that rate, with the 95 % bootstrap interval of each ratio:",
            "",
            "| ways | median, ratio [interval] | p95, ratio [interval] |",
            "|---|---|---|",
        ]
        for pair, r in f["latency_ratios"].items():
            a, b = pair.split(" / ")
            lines.append(
                f"| {NAMES[a]} / {NAMES[b]} | {_ratio(r['median'])} | {_ratio(r['p95'])} |"
            )
    lines += [
        "",
        "## Where a request's time goes, one request at a time",
        "",
        "| way | bytes sent | latency median ms [interval] | mean | of which the model | the "
        "server's other work | outside the server's clock |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in f["sequential"]:
        lines.append(
            f"| {NAMES[row['way']]} | {row['bytes_sent']:,} | {row['latency_median_ms']:.1f} "
            f"[{row['latency_lo_ms']:.1f}, {row['latency_hi_ms']:.1f}] | "
            f"{row['latency_mean_ms']:.1f} | {row['model_ms']:.1f} | "
            f"{row['server_other_ms']:.1f} | {row['outside_ms']:.1f} |"
        )
    lines += [
        "",
        "Means of one request at a time (means add up, medians do not).",
        "The model: FastAPI's and Ray's `infer` (Server-Timing: ONNX Runtime's run), Triton's",
        "compute_infer per request (its statistics: the Python backend's execute, the model and",
        "the stub's work around it). The server's other work: FastAPI's decode and queue, Triton's",
        "queue, compute_input and compute_output. Outside: the client's latency less both: HTTP,",
        "(de)serialisation, the framework's hops between processes (Ray: proxy, router, replica),",
        "the client's own work.",
        "",
        "## CPU per request, by process, at the fixed rate",
        "",
        "| way | process group: CPU ms per answered request (mean of the rounds) | load "
        "generator | machine, cores busy |",
        "|---|---|---|---|",
    ]
    for way in order:
        groups = f["cpu_ms_per_request"].get(way, {})
        text = "; ".join(f"{g.split(': ', 1)[1]} {v:.2f}" for g, v in groups.items())
        lines.append(
            f"| {NAMES[way]} | {text} | {f['generator_cpu_ms_per_request'].get(way, 0):.2f} | "
            f"{f['machine_cores_busy'].get(way, 0):.2f} |"
        )
    lines += [
        "",
        "CPU time of each process group during that way's own fixed-rate rounds (psutil), divided",
        "by the requests it answered (`cpu.csv` has each round, and the cores each group kept",
        "busy). A daemon's CPU (Ray's controller and the rest: its GCS, raylet, dashboard and",
        "agents) runs whatever the load, so per request it is large at a low rate. Machine: every",
        "process of the machine, other users' too.",
    ]
    if f["perf"]:
        lines += [
            "",
            "## perf_analyzer against Triton",
            "",
            "| run | line | result |",
            "|---|---|---|",
        ]
        for name, p in f["perf"].items():
            result = p.get("error") or (
                f"{p['infer_s']:.1f} infer/s, p50 {p['p50_ms']:.1f} ms, p95 {p['p95_ms']:.1f} ms"
                if p.get("infer_s") is not None and p.get("p95_ms") is not None
                else f"{p.get('infer_s')} infer/s"
            )
            lines.append(f"| {name} | `{p['line']}` | {result} |")
    lines += [
        "",
        "Parts (s): "
        + ", ".join(f"{k} {v:g}" for k, v in f["parts_s"].items())
        + f"; servers started again in between: {f['restarts']}.",
        "",
    ]
    return "\n".join(lines)


def write(out: Path) -> dict:
    f = figures(out)
    (out / "three_way.json").write_text(json.dumps(f, indent=2, default=str) + "\n")
    notes = out / "notes.md"
    text = markdown(f) + ("\n" + notes.read_text() if notes.exists() else "")
    (out / "README.md").write_text(text)
    return f
