#!/usr/bin/env python3
"""Reference run of the lab on a GPU machine, in local mode (no Docker), into one folder.

    python maintainers/reference/run_reference.py --out DIR [--parts fastapi,triton,hardware] \
        [--quick]
    python maintainers/reference/run_reference.py --out DIR --report  # only rewrite DIR/README.md
    python maintainers/reference/run_reference.py --out PAGE --take RUN --parts placement,one_vs_two
        # a run's standalone parts into a page (their results, logs and runs.json entries), then
        # the page's README.md

DIR is a page, docs/results/<setup>/<notebook>/ (docs/results/README.md): one notebook's part
(with `batch_switch` on notebook 6's page, `stability` on notebook 7's), so a run of several
parts into one scratch folder is split into pages before it is committed.

Builds the artifacts with the machine's own torch, starts the local stack (Triton with KIND_GPU
instances on the GPUs it finds), runs the benchmark notebooks as plain scripts (their jupytext
sources: 04 FastAPI, 06 Triton, 07 how close to the hardware) with the lab's default measurement
settings unless LAB_* variables say otherwise, samples nvidia-smi throughout, stops the stack and
writes DIR/README.md: versions, the instructor table (every "what to notice" claim with its
verdict and numbers), the tables, the plots and the served/limit ratio.

Parts can run in separate invocations into the same DIR (a device call has a time limit): each
one adds its results and its entry in DIR/runs.json, and the report covers every part present.
Hand-written remarks for the page go in DIR/notes.md; the report includes them verbatim.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PARTS = {
    "fastapi": "04_fastapi_benchmarks",
    "triton": "06_triton_benchmarks",
    "hardware": "07_how_close_to_the_hardware",
}
# not notebooks: notebook 7's best configuration on freshly started servers (maintainers/reference/
# stability.py, one start per invocation), and ONNX Runtime's cost of a batch-size change
STABILITY = "stability"
BATCH_SWITCH = "batch_switch"
PLACEMENT = "placement"  # each GPU named, each instance where its config put it (placement.py)
ONE_VS_TWO = "one_vs_two"  # one GPU against two on the same host (one_vs_two.py)
STANDALONE = (BATCH_SWITCH, PLACEMENT, ONE_VS_TWO)  # parts that are not a notebook's
TITLES = {
    "fastapi": "Notebook 4: FastAPI, PyTorch vs ONNX Runtime",
    "triton": "Notebook 6: Triton",
    "hardware": "Notebook 7: how close to the hardware?",
}


def cpu_model() -> str:
    """The host CPU's name: two runs on the same GPU kind differed by up to 1.5x where the work is
    the CPU's (decoding in the Python backend), so a page records which CPU it ran on."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def versions() -> dict:
    """What ran: the GPU, the driver's view, the Python packages that matter for the numbers."""
    from importlib import metadata

    import torch

    found = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU",
        "gpus": torch.cuda.device_count(),
        "cpu_cores": os.cpu_count(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    for dist in (
        "onnxruntime",
        "onnxruntime-gpu",
        "numpy",
        "nvidia-pytriton",
        "tritonclient",
        "fastapi",
        "uvicorn",
    ):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    if os.environ.get(
        "LAB_TRITON_PYTHONPATH"
    ):  # the stubs have their own numpy: ask the interpreter they use
        from labstack import triton_local

        found["numpy for the Python-backend stubs"] = triton_local.check_stub_numpy(
            triton_local.server_env()
        )
    if shutil.which("nvidia-smi"):
        found["nvidia-smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    if found["gpus"] > 1:  # which GPU is which: nvidia-smi's index, uuid and PCI bus
        from servelab.triton import gpu_names

        found["gpu_list"] = "; ".join(
            f"GPU {g.index} {g.uuid} bus {g.bus_id}" for g in gpu_names.listing()
        )
    return found


def run_parts(out: Path, parts: list[str], quick: bool) -> dict:
    from labstack import artifacts, lab, launcher
    from maintainers.reference.script_runner import STOPPED

    meta = artifacts.build()
    runs_file = out / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    smi = smi_log = None
    if shutil.which("nvidia-smi"):
        smi_log = open(out / f"nvidia_smi_{'_'.join(parts)}.csv", "w")
        smi = subprocess.Popen(
            [
                "nvidia-smi",
                "--query-gpu=timestamp,index,name,utilization.gpu,memory.used,power.draw"
                + (",uuid" if versions()["gpus"] > 1 else ""),
                "--format=csv",
                "-lms",
                "500",
            ],
            stdout=smi_log,
            stderr=subprocess.STDOUT,
        )
    # LAB_RESUMABLE_S: a notebook stops between cells once that many seconds have passed and the
    # same command, in the next device call on the warm machine, takes it up (script_runner)
    resumable, keep_stack = os.environ.get("LAB_RESUMABLE_S", ""), False
    try:
        launcher.up(jupyter=False, triton=any(p != "fastapi" for p in parts))
        env = {
            **os.environ,
            **launcher.client_urls(launcher.read_state()),
            "PYTHONUNBUFFERED": "1",
            # the runner (maintainers/reference/) from notebooks/, where the notebook runs
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        if quick:
            env.update({f"LAB_{k}": str(v) for k, v in lab.QUICK_PARAMS.items()})
        settings = {
            k: v
            for k, v in sorted(env.items())
            if k.startswith("LAB_")
            and k not in ("LAB_RESULTS_DIR", "LAB_STATE_DIR", "LAB_TRITON_PYTHONPATH")
        }
        for part in parts:
            name = PARTS[part]
            print(f"\n>>> {name}", flush=True)
            log = out / f"{name}.log"
            started, start = time.strftime("%F %T %Z"), time.time()
            state = out / f"{name}.state"  # a notebook stopped between cells (LAB_RESUMABLE_S)
            resuming = state.exists() and bool(resumable)
            earlier = runs.get(part, {}) if resuming else {}
            with open(log, "a" if resuming else "w") as f:
                script = [
                    sys.executable,
                    "-m",
                    "maintainers.reference.script_runner",
                    str(REPO / "notebook_sources" / f"{name}.py"),  # the solved edition
                    "--times",
                    str(out / f"{name}_cell_times.json"),
                    *(["--stop-after", resumable, "--state", str(state)] if resumable else []),
                ]
                rc = subprocess.run(
                    script, cwd=REPO / "notebooks", env=env, stdout=f, stderr=subprocess.STDOUT
                ).returncode
            runs[part] = {
                "notebook": name,
                "rc": None if rc == STOPPED else rc,
                "started": earlier.get("started", started),
                "seconds": earlier.get("seconds", 0) + round(time.time() - start),
                "calls": earlier.get("calls", 0) + 1,  # device calls it took (resumable parts)
                "quick": quick,
                "settings": settings,
                "weights": meta["weights"],
                "versions": versions(),
            }
            if rc == STOPPED:  # the stack stays up for the next call, which takes the run up
                runs[part]["stopped_after_s"] = float(resumable)
                keep_stack = True
            runs_file.write_text(json.dumps(runs, indent=2) + "\n")
            print(
                f"    rc={rc} in {runs[part]['seconds']} s; tail:\n"
                + "\n".join(log.read_text().splitlines()[-12:]),
                flush=True,
            )
            if keep_stack:
                print(f"    stopped between cells: run the same command again ({state})")
                break
    finally:
        if not keep_stack:
            launcher.down()
        if smi:
            smi.terminate()
            smi_log.close()
        logs = (
            Path(os.environ["LAB_STATE_DIR"]) / "logs"
        )  # the services' own logs (Triton's, uvicorn's)
        for log in logs.glob("*.log"):
            shutil.copy(log, out / f"service_{log.stem}_{'_'.join(parts)}.log")
    return runs


def run_batch_switch(out: Path) -> dict:
    """labstack.batch_switch's runtime mode: ONNX Runtime's cost of a batch-size change on this
    GPU, one session per cuDNN search setting and the lab's stand-in (its verdict: rc 1 if mixed
    sizes cost more than twice the same sizes grouped)."""
    started, start = time.strftime("%F %T %Z"), time.time()
    target = out / "results" / "batch_switch.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(out / "batch_switch.log", "w") as log:
        rc = subprocess.run(
            [sys.executable, "-m", "labstack.batch_switch", "runtime", "--rounds", "1"]
            + ["--out", str(target)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        ).returncode
    print((out / "batch_switch.log").read_text()[-2500:], flush=True)
    return {
        "notebook": "(labstack.batch_switch runtime: batch-size changes in ONNX Runtime)",
        "rc": rc,
        "started": started,
        "seconds": round(time.time() - start),
        "quick": False,
        "settings": {"rounds": 1},
        "versions": versions(),
    }


def write_report(out: Path) -> Path:
    import pandas as pd

    from labstack import lab

    runs = json.loads((out / "runs.json").read_text())
    res = out / "results"
    # a notebook part knows the weights; any part that ran Python on the machine its versions
    first = next((r for r in runs.values() if "weights" in r), {"weights": "not recorded"})
    v = next((r["versions"] for r in runs.values() if "versions" in r), {"gpu": "this machine"})
    notebooks = [TITLES[part] for part in runs if part in TITLES]
    title = f"{v['gpus']}x {v['gpu']}" if v.get("gpus", 1) > 1 else v["gpu"]
    lines = [
        f"# {' and '.join(notebooks) or 'Reference run'} ({title})",
        "",
        "Generated by `maintainers/reference/run_reference.py` from the files in this folder; do "
        "not edit by hand "
        "(remarks go in `notes.md`).",
        "",
    ]
    if (out / "notes.md").exists():
        lines += [(out / "notes.md").read_text().rstrip(), ""]
    lines += [
        "## What ran",
        "",
        "| part | notebook | started | minutes | exit | settings |",
        "|---|---|---|---|---|---|",
    ]
    for part, r in runs.items():
        settings = (
            ", ".join(f"{k}={val}" for k, val in r["settings"].items()) or "notebook defaults"
        )
        lines.append(
            f"| {part} | {r['notebook']} | {r['started']} | {r['seconds'] / 60:.1f} | {r['rc']} | "
            f"{'quick; ' if r['quick'] else ''}{settings} |"
        )
    lines += [
        "",
        "Machine and versions: " + "; ".join(f"{k} {val}" for k, val in v.items()),
        "",
        f"Model weights: {first['weights']} (latency and throughput do not depend on training).",
        "",
    ]

    ratio_file = res / "hardware" / "served_over_limit.json"
    if ratio_file.exists():
        r = json.loads(ratio_file.read_text())
        eager = r["served_infer_s"] / r["eager_limit"]["images_per_s"]
        lines += [
            "## Served / limit",
            "",
            f"**served/limit = {r['served_infer_s']:.0f} / {r['limit']['images_per_s']:.0f} "
            "images/s = "
            f"{r['served_over_limit']:.2f}**. Limit: the raw model, {r['limit']['path']}, batch "
            f"{r['limit']['batch']}, on {r['device']}; served: food_classifier_tuned, {r['best']}, "
            "batch-1 "
            "clients (perf_analyzer). Against the eager-fp32 limit "
            f"({r['eager_limit']['images_per_s']:.0f} "
            f"images/s, batch {r['eager_limit']['batch']}): {eager:.2f}.",
            "",
            f"The best run's perf_analyzer command: `{r['command']}`",
            "",
        ]
        if r.get("repeats_served_over_limit"):
            lines += [
                stability_line(r["repeats_served_over_limit"], "runs"),
                "",
                f"({r['repeated']}, measured again in step 7.8: each run's row is in the notebook "
                "7 table.)",
                "",
            ]

    from maintainers.reference import stability

    lines += stability.report_lines(out, 0.70)
    lines += placement_lines(res / "placement")
    from maintainers.reference import one_vs_two

    lines += one_vs_two.report_lines(res / ONE_VS_TWO)
    switch = res / "batch_switch.json"
    if switch.exists():
        from labstack import batch_switch

        data = json.loads(switch.read_text())
        lines += [
            "## ONNX Runtime and batch-size changes (`python -m labstack.batch_switch runtime`)",
            "",
            f"Batch sizes, mixed: {data['sizes']}; grouped: the same sizes sorted, each group's "
            "first call (the switch) untimed. One call at a time, milliseconds per call.",
            "",
            batch_switch.table(data["rows"]),
            "",
            f"Verdict on the lab's row (mixed <= {batch_switch.MAX_RATIO:g}x grouped): "
            f"{'holds' if data['verdict'] else '**does not hold**'}.",
            "",
        ]
    lines += [
        "## For instructors: what each step should show, and what it showed here",
        "",
        "| notebook | step: what it should show | verdict | measured | note |",
        "|---|---|---|---|---|",
    ]
    for part in [p for p in runs if p in PARTS]:
        claims = res / part / "claims.csv"
        if claims.exists():
            for _, c in lab.claims_with_verdicts(claims).iterrows():
                lines.append(
                    f"| {PARTS[part][:2]} | {c['claim']} | {c['verdict']} | {c['value']} "
                    f"{c['interval']} "
                    f"({c['rule']}) | {c['note']} |"
                )
    lines.append("")

    for part in [p for p in runs if p in PARTS]:
        folder = res / part
        if not folder.exists():
            continue
        lines += [f"## {TITLES[part]}", ""]
        if (folder / "summary.csv").exists():
            lines += [lab.summary_markdown(folder / "summary.csv"), ""]
        if (folder / "raw_limit.csv").exists():
            raw = pd.read_csv(folder / "raw_limit.csv")
            lines += [
                "The raw model (images/s, batch already on the device):",
                "",
                raw.pivot(index="batch", columns="path", values="images_per_s").to_markdown(),
                "",
            ]
        lines += [*lab.figure_and_csv_links(folder, f"results/{part}"), ""]
    lines += [
        "## The command",
        "",
        "`bash maintainers/reference/pack_device.sh` on a machine with network packs what the GPU "
        "machine lacks into parts in `.whl/`, one per device call; on the GPU machine (no "
        "Docker, no network), from the repository root, `bash maintainers/reference/device_run.sh "
        "DIR PART` unpacks them, sets the paths and runs, for each part:",
        "",
        "```",
        *(command_line(part, r) for part, r in runs.items()),
        "python3 maintainers/reference/run_reference.py --out DIR --report",
        "```",
        "",
    ]
    readme = out / "README.md"
    readme.write_text("\n".join(lines) + "\n")
    return readme


def placement_lines(folder: Path) -> list[str]:
    """The placement part's section: the GPUs, then where each instance ran for each config."""
    import pandas as pd

    if not (folder / "placement.json").exists():
        return []
    record = json.loads((folder / "placement.json").read_text())
    lines = [
        "## Each GPU by one number, each instance where its config put it (`placement`)",
        "",
        "CUDA's order in a fresh process, per environment (uuids' first characters), and what "
        "`servelab/triton/gpu_names.py` predicts for it:",
        "",
        "| environment | CUDA's order | predicted |",
        "|---|---|---|",
        *(
            f"| {e['environment'] or 'none'} | {' '.join(u[:12] for u in e['cuda_order'])} | "
            f"{' '.join(u[:12] for u in e['predicted'])} |"
            for e in record["cuda_orders"]
        ),
        "",
        "The GPUs as Triton's instances report them, beside nvidia-smi's index for each uuid:",
        "",
        pd.DataFrame(record.get("triton_gpus", [])).to_markdown(index=False),
        "",
    ]
    for placed in record.get("placements", []):
        lines += [
            f"**{placed['name']}** (`{placed['fragment']}`, loaded in {placed['seconds']} s; "
            f"Triton's memory per GPU uuid, MiB: {placed['memory_mib']}):",
            "",
            pd.DataFrame(placed["instances"]).to_markdown(index=False),
            "",
        ]
    if (folder / "claims.csv").exists():
        lines += ["| claim | verdict | numbers | note |", "|---|---|---|---|"]
        for _, c in pd.read_csv(folder / "claims.csv").fillna("").iterrows():
            lines.append(f"| {c['claim']} | {c['verdict']} | {c['numbers']} | {c['note']} |")
        lines.append("")
    return lines


def stability_line(values: list[float], what: str) -> str:
    """The line issue readers look for: the best configuration's served/limit over its runs."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return (
        f"served/limit over {len(values)} {what}: median {median:.3f}, min {min(values):.3f}, "
        f"max {max(values):.3f}"
    )


def command_line(part: str, run: dict) -> str:
    if part == STABILITY:  # one start per call; the settings are counts, not variables
        return (
            "LAB_STABILITY_BEST=FILE LAB_STABILITY_DEADLINE_S=SECONDS python3 "
            "maintainers/reference/run_reference.py --out DIR --parts stability   # once per call, "
            f"{run['settings']['starts']} starts here"
        )
    if part in STANDALONE:
        settings = " ".join(f"{k}={v}" for k, v in run["settings"].items() if k.startswith("LAB_"))
        return (
            f"{settings + ' ' if settings else ''}python3 maintainers/reference/run_reference.py "
            f"--out DIR --parts {part}"
        )
    settings = " ".join(f"{k}={v}" for k, v in run["settings"].items())
    return (
        f"{settings + ' ' if settings else ''}python3 maintainers/reference/run_reference.py "
        f"--out DIR --parts {part}" + (" --quick" if run["quick"] else "")
    )


def take(run_dir: Path, page: Path, parts: list[str]) -> None:
    """A run folder's standalone parts into a page: results/<part>/ (replacing the page's), the
    logs named after the part (service_triton_placement.log, placement_run.log, ...), and the
    parts' entries in runs.json (the others stay)."""
    unknown = set(parts) - set(STANDALONE)
    if unknown:
        raise SystemExit(f"--take brings standalone parts only ({', '.join(STANDALONE)})")
    taken = json.loads((run_dir / "runs.json").read_text())
    runs_file = page / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    for part in parts:
        if part not in taken:
            raise SystemExit(f"{run_dir}/runs.json has no part {part!r}")
        runs[part] = taken[part]
        results = run_dir / "results" / part
        if results.is_dir():
            shutil.rmtree(page / "results" / part, ignore_errors=True)
            shutil.copytree(results, page / "results" / part)
        for log in run_dir.glob(f"*{part}*.log"):
            shutil.copy(log, page / log.name)
        print(f"took {part} from {run_dir}", flush=True)
    runs_file.write_text(json.dumps(runs, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument("--quick", action="store_true", help="the CI-sized measurement settings")
    parser.add_argument(
        "--report", action="store_true", help="only rewrite DIR/README.md from DIR's files"
    )
    parser.add_argument(
        "--take", type=Path, help="a run folder whose --parts (standalone) go into DIR, a page"
    )
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(REPO))
    rc = 0
    if args.take:
        take(args.take.resolve(), out, [p.strip() for p in args.parts.split(",") if p.strip()])
    elif not args.report:
        parts = [p.strip() for p in args.parts.split(",") if p.strip()]
        unknown = set(parts) - set(PARTS) - {STABILITY, *STANDALONE}
        if unknown:
            parser.error(
                f"unknown parts {sorted(unknown)}: choose from {[*PARTS, STABILITY, *STANDALONE]}"
            )
        # servelab reads these at import: set them first
        # (the stack's state and model repository stay out of DIR: DIR is what gets committed)
        scratch = Path(tempfile.mkdtemp(prefix="gpu_reference_"))
        if os.environ.get("LAB_RESUMABLE_S"):  # the next call must find the same stack
            scratch = Path(tempfile.gettempdir()) / "gpu_reference_resumable"
            scratch.mkdir(exist_ok=True)
        os.environ.update(
            LAB_RESULTS_DIR=str(out / "results"),
            LAB_STATE_DIR=str(scratch / "lab"),
            TRITON_MODEL_REPOSITORY=str(scratch / "model_repository"),
        )
        runs_file = out / "runs.json"
        runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
        if BATCH_SWITCH in parts:
            runs[BATCH_SWITCH] = run_batch_switch(out)
            runs_file.write_text(json.dumps(runs, indent=2) + "\n")
        if PLACEMENT in parts:
            from maintainers.reference import placement

            started, start = time.strftime("%F %T %Z"), time.time()
            rc = placement.run(out)
            runs[PLACEMENT] = {
                "notebook": "(maintainers/reference/placement.py: each GPU named, each instance "
                "placed)",
                "rc": rc,
                "started": started,
                "seconds": round(time.time() - start),
                "quick": False,
                "settings": {},
                "versions": versions(),
            }
            runs_file.write_text(json.dumps(runs, indent=2) + "\n")
        if ONE_VS_TWO in parts:
            from maintainers.reference import one_vs_two

            started, start = time.strftime("%F %T %Z"), time.time()
            rc = one_vs_two.run(out)
            runs[ONE_VS_TWO] = {
                "notebook": "(maintainers/reference/one_vs_two.py: one GPU against two, one host)",
                "rc": rc,
                "started": started,
                "seconds": round(time.time() - start),
                "quick": False,
                "settings": {
                    k: os.environ[k] for k in ("LAB_PERF_INTERVAL_MS",) if k in os.environ
                },
                "versions": versions(),
            }
            runs_file.write_text(json.dumps(runs, indent=2) + "\n")
        notebooks = [p for p in parts if p in PARTS]
        if notebooks:
            runs = run_parts(out, notebooks, args.quick)
        if STABILITY in parts:
            from maintainers.reference import stability

            runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
            # one start, then more while the longest start so far still fits before the deadline
            # (LAB_STABILITY_DEADLINE_S from now: what is left of a device call)
            deadline = time.time() + float(os.environ.get("LAB_STABILITY_DEADLINE_S", 0))
            entry = stability.run_one_start(out)
            longest = entry["seconds"]
            while "error" not in entry and time.time() + 1.2 * longest + 20 < deadline:
                entry = stability.run_one_start(out)
                longest = max(longest, entry["seconds"])
            record = stability.load(out)
            runs[STABILITY] = {
                "notebook": "(notebook 7's best configuration, one fresh server per call)",
                "rc": 1 if "error" in entry else 0,
                "started": record["starts"][0]["started"],
                "seconds": sum(s["seconds"] for s in record["starts"]),
                "quick": False,
                "settings": {"starts": len(record["starts"]), "window_ms": record["window_ms"]},
            }
            runs_file.write_text(json.dumps(runs, indent=2) + "\n")
        rc = 0 if all(runs[p]["rc"] == 0 for p in parts) else 1
        if any(runs[p].get("stopped_after_s") and runs[p]["rc"] is None for p in parts):
            rc = 75  # stopped between cells: the same command again takes the notebook up
    readme = write_report(out)
    ratio = out / "results" / "hardware" / "served_over_limit.json"
    if ratio.exists():
        r = json.loads(ratio.read_text())
        served, limit = r["served_infer_s"], r["limit"]["images_per_s"]
        print(f"served/limit = {served:.0f} / {limit:.0f} = {r['served_over_limit']:.3f}")
    print(f"report: {readme}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
