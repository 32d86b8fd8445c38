"""The lease plan: how many minutes notebooks 2-6 take a median student, from measured durations.

    python -m labstack.timing [--reference DIR]   # make timing: rewrites the table (DIR: a setup)
    python -m labstack.timing --check                           # exit 1 if the table is stale

Each notebook's minutes are the sum of
- machine time: the reference page's measured cell durations at the class's settings
  (docs/results/<setup>/<notebook>/<notebook>_cell_times.json of gpu_reference/run_reference.py),
  else its runs.json total;
- reading: the words of the notebook's prose at READING_WPM;
- writing: what the student writes, counted in the notebook's source (solution regions by the
  check that follows them: exercises, decisions and the answers before each verdict; the edits
  made in an editor; predictions), at the minutes in WRITING, answers included (notebook 0 asks
  for them during the lease);
- host commands: each command a notebook prints for a terminal on the node, at HOST_MINUTES;
counted over the core path: a section whose `## ` heading says "(optional" (going further, the
open exercise at the end) is shown in its own column and left out of the total;
- waits outside the notebook (a bare-metal boot, image downloads), from WAITS, each with its
  source. The figures in the rules are estimates and say so; the machine times are measured.
The table sits between the two markers of docs/timing_plan.md; the rest of that page is prose.
docs/instructors.md's table of notebooks reads each notebook's minutes from the same plan (the
spans `<!-- minutes:NAME -->...<!-- /minutes -->`, rewritten by `make timing`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from servelab.paths import REPO_ROOT

SOURCES = REPO_ROOT / "notebook_sources"
PLAN = REPO_ROOT / "docs" / "timing_plan.md"
GUIDE = REPO_ROOT / "docs" / "instructors.md"  # its table quotes each notebook's minutes
BEGIN, END = "<!-- timing table: begin (make timing) -->", "<!-- timing table: end -->"
CLASS_WINDOW_MS = "5000"  # the class's windows (servelab.perf.command.measurement_settings)

# Adults read non-fiction silently at about 238 words a minute (Brysbaert, "How many words do we
# read per minute?", J. Memory and Language 109, 2019); a lab text full of numbers, more slowly
READING_WPM = 150
WRITING = {  # minutes per thing the student writes (estimates for a median student)
    "perf_line": 2.0,
    "config_fragment": 3.0,
    "file_edit": 4.0,
    "curl_line": 2.0,
    "result": 3.0,
    "function": 5.0,
    "decision": 2.0,  # a choice read off your own rows (servelab.exercises.judgement)
    "other exercise": 3.0,
    "prediction": 1.5,
    "answer": 3.0,  # a "What do you see, and why?" answer (before its verdict, if it has one)
}
HOST_MINUTES = 0.5  # switching to the node's terminal, pasting a printed command, coming back
HOST_CALLS = re.compile(r"services\.(?:use_fastapi_backend|use_flask_triton_model|ask_host)\(")
NOTEBOOKS = {  # the lease's notebooks and the reference run part that measures each
    "02_provision": None,
    "03_fastapi_setup": None,
    "04_fastapi_benchmarks": "fastapi",
    "05_triton_setup": None,
    "06_triton_benchmarks": "triton",
}
# Waits a notebook's cells do not measure, with where each figure comes from.
WAITS = {
    "02_provision": [
        (
            10.0,
            "bare-metal boot: 'typically 10 minutes ... up to 20' (python-chi 1.2.10, "
            "chi/server.py, wait_for_active)",
        ),
        (
            6.0,
            "docker/setup_host.sh and `make artifacts` on the node: estimate (apt and pip "
            "downloads; not measured on a class node)",
        ),
    ],
    "03_fastapi_setup": [
        (
            5.0,
            "FastAPI and Flask images: estimate for a class node; the stand-in builds here take "
            "82 s and 4 s (shared/DOCKER_LOCAL.md)",
        ),
    ],
    "05_triton_setup": [
        (
            4.0,
            "the rest of the Triton image's download, started after notebook 2: NVIDIA's "
            "tritonserver py3 image is ~15.5 GB on disk (triton-inference-server/server#7474); "
            "estimate",
        ),
    ],
}


def cells(source: str) -> list[tuple[str, str]]:
    """(kind, text) of a jupytext percent-format source: kind 'markdown' or 'code'. A cell's
    `# %%runs_in ...` line (servelab/passes/cells.py) is its first line, not a cell."""
    parts = re.split(r"^# %%((?: .*)?)$", source, flags=re.M)
    out = []
    for header, body in zip(parts[1::2], parts[2::2]):
        out.append(("markdown" if "[markdown]" in header else "code", body))
    return out


def split_core(source: str) -> tuple[str, str]:
    """(core path, optional part) of a source: a `## ` section whose heading says "(optional" is
    optional up to the next `## ` heading."""
    core: list[str] = []
    optional: list[str] = []
    current = core
    for kind, body in cells(source):
        heading = re.search(r"^# ## (.*)$", body, flags=re.M) if kind == "markdown" else None
        if heading:
            current = optional if "(optional" in heading.group(1) else core
        current.append(f"# %%{' [markdown]' if kind == 'markdown' else ''}\n{body}")
    return "".join(core), "".join(optional)


def prose_words(source: str) -> int:
    words = 0
    for kind, body in cells(source):
        if kind == "markdown":
            text = "\n".join(line[2:] for line in body.splitlines() if line.startswith("# "))
            words += len(re.findall(r"[A-Za-z0-9][\w'.-]*", text))
    return words


def writing(source: str) -> dict[str, int]:
    """What the student writes: each solution region by the exercises.* check after it."""
    counts: dict[str, int] = {}
    for match in re.finditer(r"### BEGIN SOLUTION", source):
        after = source[match.end() :]
        check = re.search(r"(exercises|judgement)\.(\w+)\(", after[:3000])
        kind = "other exercise"
        if check and check.group(1) == "judgement":
            kind = "answer" if check.group(2) == "verdict_after" else "decision"
        elif check and check.group(2) in WRITING:
            kind = check.group(2)
        counts[kind] = counts.get(kind, 0) + 1
    # an edit made in an editor has no solution region (the solved edition makes it in a hidden
    # test region); its check names it
    counts["file_edit"] = len(re.findall(r"exercises\.file_edit\(", source))
    counts["prediction"] = len(re.findall(r"claims\.predict\(", source))
    # an answer with no verdict after it stays a markdown cell
    counts["answer"] = counts.get("answer", 0) + len(re.findall(r"\*\*Your answer:\*\*", source))
    return {k: v for k, v in counts.items() if v}


def host_commands(source: str) -> int:
    """Commands a notebook prints for the node's terminal (Docker route): the labenv calls that
    print one, and each ```bash block of its prose."""
    return len(HOST_CALLS.findall(source)) + len(re.findall(r"^# ```bash", source, flags=re.M))


def machine_minutes(reference: Path, part: str | None, notebook: str) -> tuple[float, str]:
    """A notebook's machine minutes from its page in `reference`, a setup's folder of pages."""
    if part is None:
        return 0.0, "no measurement cells"
    reference = reference / notebook
    times = reference / f"{notebook}_cell_times.json"
    runs = json.loads((reference / "runs.json").read_text())
    settings = runs.get(part, {}).get("settings", {})
    window = settings.get("LAB_PERF_INTERVAL_MS", "5000")
    where = f"{reference.relative_to(REPO_ROOT)}"
    note = "" if window == CLASS_WINDOW_MS else f" at {window} ms windows, NOT the class's 5000"
    if times.exists():
        seconds = sum(c["seconds"] for c in json.loads(times.read_text()))
        return seconds / 60, f"measured: {where}/{times.name}{note}"
    if part in runs:
        return runs[part]["seconds"] / 60, f"measured: {where}/runs.json (whole run){note}"
    return 0.0, f"not measured: no '{part}' run in {where}"


def plan(reference: Path) -> list[dict]:
    rows = []
    for notebook, part in NOTEBOOKS.items():
        source, optional = split_core((SOURCES / f"{notebook}.py").read_text())
        machine, machine_note = machine_minutes(reference, part, notebook)
        words = prose_words(source)
        written = writing(source)
        optional_minutes = prose_words(optional) / READING_WPM + sum(
            WRITING[k] * n for k, n in writing(optional).items()
        )
        rows.append(
            {
                "notebook": notebook,
                "machine": machine,
                "machine_note": machine_note,
                "reading": words / READING_WPM,
                "words": words,
                "writing": sum(WRITING[k] * n for k, n in written.items()),
                "written": written,
                "host": host_commands(source) * HOST_MINUTES,
                "host_commands": host_commands(source),
                "waits": sum(m for m, _ in WAITS.get(notebook, [])),
                "wait_notes": [w for _, w in WAITS.get(notebook, [])],
                "optional": optional_minutes,
            }
        )
    return rows


def in_lease(r: dict) -> float:
    """A notebook's minutes in the lease: a wait (a boot, a download) is time to read."""
    return r["machine"] + r["writing"] + r["host"] + max(r["reading"], r["waits"])


def table(rows: list[dict]) -> tuple[str, float]:
    """The plan's table and the lease's total. A wait (a boot, a download) is time to read, so a
    notebook takes machine + writing + host commands + the longer of reading and waiting."""
    lines = [
        "| notebook | machine (measured) | reading | waits | writing (answers included) | "
        "host commands | in the lease | optional parts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total = 0.0
    for r in rows:
        minutes = in_lease(r)
        total += minutes
        typed = ", ".join(f"{n} {k}" for k, n in r["written"].items()) or "nothing"
        waits = "; ".join(r["wait_notes"]) or "none"
        lines.append(
            f"| {r['notebook']} | {r['machine']:.1f} ({r['machine_note']}) | "
            f"{r['reading']:.0f} ({r['words']} words) | {r['waits']:.0f} ({waits}) | "
            f"{r['writing']:.0f} ({typed}) | {r['host']:.1f} ({r['host_commands']}) | "
            f"**{minutes:.0f}** | {r['optional']:.0f} |"
        )
    lines.append(f"| **notebooks 2–6** | | | | | | **{total:.0f}** of 150 | |")
    rules = ", ".join(f"{k} {v:g} min" for k, v in WRITING.items())
    lines += [
        "",
        f"Rules (estimates, in labstack/timing.py): reading at {READING_WPM} words a minute, "
        f"done while waiting where a notebook waits; writing: {rules}; a host command "
        f"{HOST_MINUTES:g} min. Machine minutes are measured; waits carry their sources. Optional "
        "parts (going further, the open exercises) are reading and writing minutes outside the "
        "total.",
    ]
    return "\n".join(lines), total


def render(reference: Path) -> tuple[str, str]:
    """(timing_plan.md, instructors.md) with the plan's table and minutes put in."""
    page = PLAN.read_text()
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{PLAN}: the markers {BEGIN!r} and {END!r} are missing")
    rows = plan(reference)
    body, _ = table(rows)
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    minutes = {r["notebook"]: in_lease(r) for r in rows}
    guide = re.sub(
        r"<!-- minutes:(\w+) -->.*?<!-- /minutes -->",
        lambda m: f"<!-- minutes:{m[1]} -->{minutes[m[1]]:.0f} min<!-- /minutes -->",
        GUIDE.read_text(),
    )
    return f"{head}{BEGIN}\n{body}\n{END}{tail}", guide


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    reference = REPO_ROOT / "docs" / "results" / "h100"  # its pages ran at the class's 5 s windows
    parser.add_argument("--reference", type=Path, default=reference)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    page, guide = render(args.reference.resolve())
    if args.check:
        stale = [p for p, text in ((PLAN, page), (GUIDE, guide)) if text != p.read_text()]
        if stale:
            print(f"{', '.join(map(str, stale))} stale: run `make timing`", file=sys.stderr)
            return 1
        return 0
    PLAN.write_text(page)
    GUIDE.write_text(guide)
    _, total = table(plan(args.reference.resolve()))
    print(f"{PLAN}: notebooks 2-6 take {total:.0f} minutes for a median student")
    return 0


if __name__ == "__main__":
    sys.exit(main())
