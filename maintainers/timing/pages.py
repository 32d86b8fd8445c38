"""The plan as its readers see it: docs/timing_plan.md's tables, and the minutes per pass quoted
in notebook 0, the instructors' guide and the class edition's README, each filled between its
markers so that a test finds a figure that no longer matches the notebooks.

    <!-- timing NAME: begin (make timing) --> ... <!-- timing NAME: end -->   a generated block
    <!-- timing:KEY -->126 min<!-- /timing -->                              a figure (VALUES)
    <!-- minutes:04_fastapi_benchmarks -->...<!-- /minutes -->               a notebook's passes
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path

from labstack import editions
from maintainers.timing import background, rules, walkthrough
from maintainers.timing import plan as rule_plan
from maintainers.timing.plan import CATEGORIES, GOALS, LEASE, NOTEBOOKS, Notebook, minutes, totals
from servelab.paths import REPO_ROOT

PLAN = REPO_ROOT / "docs" / "timing_plan.md"
GUIDE = REPO_ROOT / "docs" / "instructors.md"
CLASS_README = REPO_ROOT / "docs" / "class_edition" / "README.md"
NOTEBOOK_0 = editions.source_of("00_how_to_use_this_lab")
PASS_NAMES = {"prepare": "prepare", "measure": "measure (the lease)", "review": "review"}
NODE_KINDS = tuple(k for k in rules.MINUTES if k not in rule_plan.CATEGORY)  # on the node


def _goal(value: float, goal: float) -> str:
    """The minutes and the verdict; a tenth more where rounding would hide it (120.3, OVER 120)."""
    shown = f"{value:.1f}" if value > goal and round(value) <= goal else f"{value:.0f}"
    return f"{shown} ({'within' if value <= goal else 'OVER'} {goal})"


def summary(fresh: list[Notebook], image: list[Notebook]) -> str:
    lines = [
        "| notebook | prepare, before the lease | measure, fresh node | measure, prepared "
        "image | review, after the lease |",
        "|---|---|---|---|---|",
    ]
    for a, b in zip(fresh, image):
        lines.append(
            f"| {a.name} | {a.total('prepare'):.0f} | {a.total('measure'):.0f} | "
            f"{b.total('measure'):.0f} | {a.total('review'):.0f} |"
        )
    t, ti = totals(fresh), totals(image)
    shown = [
        _goal(t["prepare"], GOALS["prepare"]),
        _goal(t["measure"], GOALS["measure"]),
        _goal(ti["measure"], GOALS["measure"]),
        _goal(t["review"], GOALS["review"]),
    ]
    lines.append("| **notebooks 2–6** (goal) | " + " | ".join(f"**{s}**" for s in shown) + " |")
    return "\n".join(lines)


def breakdown(fresh: list[Notebook]) -> str:
    out = []
    for p in ("prepare", "measure", "review"):
        used = [c for c in CATEGORIES if any(nb.by.get((p, c), 0) > 0.05 for nb in fresh)]
        out += [f"**{PASS_NAMES[p]}** (fresh node)", "", f"| notebook | {' | '.join(used)} | all |"]
        out.append("|---" * (len(used) + 2) + "|")
        for nb in fresh:
            cols = " | ".join(f"{nb.by.get((p, c), 0):.1f}" for c in used)
            out.append(f"| {nb.name} | {cols} | **{nb.total(p):.0f}** |")
        out.append("")
    return "\n".join(out).rstrip()


def _where(step) -> str:
    """A step's section, short: its number (6.3) or its first words."""
    head = step.section.split(" ")
    return head[0] if head[0][:1].isdigit() else " ".join(head[:3]) or "the top"


def steps_list(fresh: list[Notebook]) -> str:
    """What each notebook has the student do, as counted (so a reader can check the counting)."""
    out = []
    for nb in fresh:
        written = Counter()
        node, waits, asked = [], [], []
        for s, cost in zip(nb.steps, nb.costs):
            if rule_plan.CATEGORY.get(s.kind) == "writing":
                written[s.kind] += 1
            elif s.kind in ("answer", "hand-in", "question", "decision", "observation"):
                asked.append(f"{s.kind} ({_where(s)}): {s.amount:g}")
            elif s.kind == "background":
                waits.append(f"starts {s.what}")
            elif s.kind == "wait":
                paid = "" if abs(cost - s.amount) < 0.05 else f" (the lease pays {cost:.1f})"
                waits.append(f"{s.what} {s.amount:g}{paid}")
            elif s.kind in NODE_KINDS:
                what = s.what or s.kind
                node.append(f"{what} ({_where(s)}, {minutes(s):g} min)")
        out.append(
            f"- **{nb.name}**: machine {nb.machine.seconds / 60:.1f} min ({nb.machine.note})"
        )
        for label, items in (
            ("writes (prepare)", [f"{n} {k}" for k, n in written.items()]),
            ("judges (questions or choices)", asked),
            ("on the node, in a browser or an editor (measure)", node),
            ("waits (measure, minutes)", waits),
        ):
            if items:
                out.append(f"  - {label}: " + "; ".join(items))
    return "\n".join(out)


def rules_text() -> str:
    per = "; ".join(
        f"{k} {b:g}" + (f" + {u:g} per unit" if u else "") for k, (b, u) in rules.MINUTES.items()
    )
    waits = "\n".join(
        f"- {w.name} ({w.notebook}): {w.minutes:g} min ({w.low:g}–{w.high:g}; "
        f"{w.with_image:g} on the prepared image){', at each' if w.every else ''}"
        f"{', downloads (shares the network with a build beside it)' if w.downloads else ''}"
        f": {w.source}"
        for w in rules.WAITS
    )
    return (
        f"Reading: prose at {rules.READING_WPM} words a minute, code at "
        f"{rules.CODE_LINES_PER_MIN} lines a minute (prepare; notebook 2's in the lease, while "
        f"the node boots), the prose again at {rules.SKIM_WPM} words a minute in the lease. "
        f"Minutes per step: {per}. Waits (estimates, each with its source):\n\n{waits}\n\n"
        f"Background work: {rules.BACKGROUND_RULE}"
    )


def _at(minute: float | None) -> str:
    return "—" if minute is None else f"{minute:.0f}"


def background_table(timeline, timelines: dict) -> str:
    """The image build notebook 2 starts, on the lease's clock: by the rules and walked."""
    shown = [("the plan (rules)", timeline)] + [
        (f"walkthrough: {name}", t) for name, t in timelines.items()
    ]
    lines = [
        "| lease minute, or minutes (fresh node) | " + " | ".join(n for n, _ in shown) + " |",
        "|---" * (len(shown) + 1) + "|",
        "| the build starts (notebook 2) | " + " | ".join(_at(t.started) for _, t in shown) + " |",
    ]
    for part, wait in zip(background.PARTS, [w for w in rules.WAITS if w.part]):
        cells = [
            f"{p.work:.1f}: built at {_at(p.built)}, reached at {_at(p.reached)}, pays {p.paid:.1f}"
            for p in (t.parts[part] for _, t in shown)
        ]
        lines.append(f"| {wait.name}, {wait.notebook[:2]} | " + " | ".join(cells) + " |")
    lines.append(
        "| the model files' wait, longer beside the build (minutes) | "
        + " | ".join(f"{t.contention:.1f}" for _, t in shown)
        + " |"
    )
    lines.append(
        "| the build ends / notebook 4's first GPU run | "
        + " | ".join(f"{_at(t.ended)} / {_at(t.first_run)}" for _, t in shown)
        + " |"
    )
    return "\n".join(lines)


def walk_table(walks: dict, walks_image: dict, fresh: list[Notebook]) -> str:
    lines = [
        "| pass | the plan (rules) | walkthrough: fast | median | slow |",
        "|---|---|---|---|---|",
    ]
    t = totals(fresh)
    for p, label in (
        ("prepare", "prepare"),
        ("measure", "measure, fresh node"),
        ("measure_image", "measure, prepared image"),
        ("review", "review"),
    ):
        source = walks_image if p == "measure_image" else walks
        key = "measure" if p == "measure_image" else p
        figures = [
            sum(walkthrough.pass_total(by, key) for by in source[s.name].values())
            for s in walkthrough.STUDENTS
        ]
        planned = t[key] if p != "measure_image" else None
        shown = f"{planned:.0f}" if planned is not None else "see above"
        lines.append(f"| {label} | {shown} | " + " | ".join(f"{f:.0f}" for f in figures) + " |")
    lines += ["", "Per notebook, the median student (prepare / measure / review):", ""]
    lines.append("| notebook | the plan | walkthrough, median |")
    lines.append("|---|---|---|")
    for nb in fresh:
        w = {p: walkthrough.pass_total(walks["median"][nb.name], p) for p in PASS_NAMES}
        lines.append(
            f"| {nb.name} | {nb.total('prepare'):.0f} / {nb.total('measure'):.0f} / "
            f"{nb.total('review'):.0f} | {w['prepare']:.0f} / {w['measure']:.0f} / "
            f"{w['review']:.0f} |"
        )
    return "\n".join(lines)


# why the walkthrough and the plan differ, by what they time (no figures: those are in the table)
WHY = {
    "reading": "the plan reads prose at one speed and code by its lines; the walkthrough reads "
    "prose by Carver's gears (instructions slower, tables faster) and code by its tokens",
    "writing": "the plan gives each kind of line a fixed time that includes looking flags up; "
    "the walkthrough types each character and recalls each name (keystroke-level model), with a "
    "stated chance of a second try",
    "answers and decisions": "both count the questions; the plan gives each 2 minutes (3 for a "
    "hand-in question), the walkthrough the words of an answer at composing speed",
    "browser, SSH, editor, terminal": "the plan gives each step minutes with room to fumble; the "
    "walkthrough counts its keystrokes, pointings and mental steps, made slower by a factor per "
    "student",
    "running cells": "the plan gives a cell 12 s to run and look at; the walkthrough a keystroke, "
    "a mental step and a glance, and scans what the reference's runs printed",
    "waits": "the plan's waits are stated estimates; the walkthrough's are built from megabytes "
    "at a node's bandwidth plus build times measured here with local mirrors; both count the "
    "background build by the same overlap rule",
    "machine (measured)": "the same measurement in both",
}


def disagreements(fresh: list[Notebook], walks: dict) -> str:
    lines = [
        "| pass | what | the plan | walkthrough, median | why they differ |",
        "|---|---|---|---|---|",
    ]
    for p in PASS_NAMES:
        for c in CATEGORIES:
            planned = sum(nb.by.get((p, c), 0.0) for nb in fresh)
            walked = sum(by.get((p, c), 0.0) for by in walks["median"].values())
            if planned < 0.5 and walked < 0.5:
                continue
            lines.append(f"| {p} | {c} | {planned:.0f} | {walked:.0f} | {WHY[c]} |")
    return "\n".join(lines)


def values(fresh: list[Notebook], image: list[Notebook], walks: dict, walks_image: dict) -> dict:
    """The figures quoted in prose: <!-- timing:KEY -->...<!-- /timing -->."""
    t, ti = totals(fresh), totals(image)

    def walked(source, p):
        return [
            sum(walkthrough.pass_total(by, p) for by in source[s.name].values())
            for s in walkthrough.STUDENTS
        ]

    def span(source, p):
        fast, median, slow = walked(source, p)
        return f"{median:.0f} min ({fast:.0f}–{slow:.0f})"

    return {
        "prepare": f"{t['prepare']:.0f} min",
        "measure": f"{t['measure']:.0f} min",
        "measure_image": f"{ti['measure']:.0f} min",
        "review": f"{t['review']:.0f} min",
        "margin": f"{LEASE - t['measure']:.0f} min",
        "margin_image": f"{LEASE - ti['measure']:.0f} min",
        "image_saves": f"{t['measure'] - ti['measure']:.0f} min",
        "walk_prepare": span(walks, "prepare"),
        "walk_measure": span(walks, "measure"),
        "walk_measure_image": span(walks_image, "measure"),
        "walk_review": span(walks, "review"),
    }


def fill(text: str, blocks: dict[str, str], figures: dict[str, str], per_notebook: dict) -> str:
    for name, body in blocks.items():
        begin, end = f"<!-- timing {name}: begin (make timing) -->", f"<!-- timing {name}: end -->"
        if begin in text:
            head, rest = text.split(begin, 1)
            text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
    text = re.sub(
        r"<!-- timing:(\w+) -->.*?<!-- /timing -->",
        lambda m: f"<!-- timing:{m[1]} -->{figures[m[1]]}<!-- /timing -->",
        text,
    )
    return re.sub(
        r"<!-- minutes:(\w+) -->.*?<!-- /minutes -->",
        lambda m: f"<!-- minutes:{m[1]} -->{per_notebook[m[1]]}<!-- /minutes -->",
        text,
    )


def render() -> dict[Path, str]:
    """Every page the plan fills, as `make timing` writes it."""
    (fresh, timeline), image = rule_plan.timed(NOTEBOOKS), rule_plan.plan(prepared_image=True)
    walked = walkthrough.walks()
    walks = {name: by for name, (by, _) in walked.items()}
    walks_image = walkthrough.estimate(prepared_image=True)
    blocks = {
        "summary": summary(fresh, image),
        "breakdown": breakdown(fresh),
        "steps": steps_list(fresh),
        "rules": rules_text(),
        "background": background_table(timeline, {n: t for n, (_, t) in walked.items()}),
        "walkthrough": walk_table(walks, walks_image, fresh),
        "disagreements": disagreements(fresh, walks),
    }
    figures = values(fresh, image, walks, walks_image)
    figures["build_saves"] = f"{sum(p.work - p.paid for p in timeline.parts.values()):.0f} min"
    figures["contention"] = f"{timeline.contention:.0f} min"
    figures["build_ends"] = f"minute {timeline.ended:.0f}"
    figures["first_run"] = f"minute {timeline.first_run:.0f}"
    per_notebook = {
        a.name: f"prepare {a.total('prepare'):.0f}, lease {a.total('measure'):.0f} "
        f"({b.total('measure'):.0f} on a prepared image), review {a.total('review'):.0f} min"
        for a, b in zip(fresh, image)
    }
    for before in ("00_how_to_use_this_lab", "01_reserve"):  # read and run before the lease
        nb = rule_plan.notebook(before)
        per_notebook[before] = f"{sum(nb.by.values()):.0f} min"
    optional = rule_plan.notebook("07_how_close_to_the_hardware")  # its own lease, if any
    per_notebook[optional.name] = (
        f"prepare {optional.total('prepare'):.0f}, measure {optional.total('measure'):.0f}, "
        f"review {optional.total('review'):.0f} min"
    )
    pages = {
        p: fill(p.read_text(), blocks, figures, per_notebook)
        for p in (PLAN, GUIDE, CLASS_README, NOTEBOOK_0)
    }
    student = editions.STUDENT / f"{NOTEBOOK_0.stem}.ipynb"
    pages[student] = student_edition(pages[NOTEBOOK_0])
    return pages


def student_edition(source_text: str) -> str:
    """Notebook 0's student edition (notebooks/), made from its source's text as `make notebooks`
    makes it, so the notebook a student opens quotes the same minutes."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / NOTEBOOK_0.name
        source.write_text(source_text)
        return editions.text(editions.student(source))


def stale() -> list[Path]:
    return [path for path, text in render().items() if path.read_text() != text]


def write() -> list[Path]:
    changed = []
    for path, text in render().items():
        if path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
