"""The second estimate: the notebooks walked cell by cell, as a student meets them, each step
timed by other means than the plan's rules, for a fast, a median and a slow student.

It takes the steps that steps.py finds (what the student does, and in which pass) and times
each from what the cell itself holds, not from a minutes-per-kind table:

- reading by Carver's reading gears (R. P. Carver, "Reading rate: theory, research, and
  practical implications", J. of Reading 36(2), 1992): learning 200 words a minute for prose that
  explains, memorizing 138 for prose that asks the student to act (an exercise, a prediction, a
  question), scanning 600 for tables and command blocks; code by its tokens, each read as a word
  at the memorizing gear; in the lease, the prose is scanned;
- what is typed or done on a screen by the keystroke-level model (Card, Moran and Newell, "The
  keystroke-level model for user performance time with interactive systems", CACM 23(7), 1980):
  K a keystroke (0.28 s for an average typist), P pointing (1.1 s), M a mental step (1.35 s),
  each character the student writes a K, each name or flag of it an M to recall and a P to find
  it in the prose, and a retry with a stated probability where a check can refuse;
- answers at the speed people compose text at a keyboard, about 19 words a minute (Karat et al.,
  "Patterns of entry and correction in large vocabulary continuous speech recognition systems",
  CHI 1999), at a stated length per question;
- waits from their parts: megabytes downloaded at a node's bandwidth, plus the build's own time
  measured on this project's CPU machine with local package mirrors (shared/DOCKER_LOCAL.md);
  the image build that notebook 2 starts in the background is counted by the plan's own overlap
  rule (background.py), with these minutes;
- machine minutes: the same measured runs as the plan (there is only one measurement), placed on
  the cells that make them; what those runs printed (the reference's log, in words) is scanned
  as it comes, which the plan's rules leave inside a cell's minutes.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, replace

from maintainers.timing import background, rules
from maintainers.timing import plan as rule_plan
from maintainers.timing.notebook import Cell, cells
from maintainers.timing.steps import Step

K, P, M = 0.28, 1.1, 1.35  # seconds: keystroke, point, mental step (Card, Moran and Newell)
GEARS = {"learning": 200, "memorizing": 138, "scanning": 600}  # words a minute (Carver)
ACT = re.compile(r"Exercise|Predict|Decision|\*\*Question|What do you see|Your observation")


@dataclass(frozen=True)
class Student:
    name: str
    reads: float  # times the gears' speed
    keystroke: float  # seconds
    composes_wpm: float
    words_per_answer: int
    megabytes_per_s: float  # the node's download speed
    boot: float  # minutes (python-chi: 10 to 20)
    slower: float  # times every KLM sequence (fumbling, a second try)


STUDENTS = (
    Student("fast", 1.25, 0.20, 25, 20, 100, 10, 1.0),
    Student("median", 1.0, 0.28, 19, 30, 50, 12, 1.5),
    Student("slow", 0.7, 0.50, 13, 45, 20, 20, 2.5),
)
# a KLM sequence per step on a screen: (P, M, typed characters, seconds waited)
SEQUENCES = {
    "ssh login": (3, 3, 70, 8),  # a terminal, the ssh line, the host key's "yes", the login
    "tunnel": (3, 3, 100, 8),  # the ssh -L line, then the local URL in the browser
    "swagger": (8, 5, 60, 4),  # expand, Try it out, print a body, copy, paste, Execute, read
    "browser page": (7, 3, 30, 4),  # the page's URL, the file dialog, submit, read the label
    "jupyter url": (6, 3, 20, 4),  # print the URL, copy it, paste it in the browser
    "node terminal": (5, 3, 80, 8),  # a second ssh session, nvtop, windows side by side
    "nvidia-smi": (2, 3, 12, 1),
    "host command": (4, 2, 4, 0),  # select the printed command, copy, paste on the node, back
    "terminal command": (4, 1, 4, 0),  # per line
    "clean-up": (2, 2, 4, 60),  # DELETE_SERVER = True, run: the bundles come back, delete
    "open notebook": (3, 1, 20, 3),
}
RETRY = {  # the chance that a check refuses the first try (a retry costs half the step again)
    "perf_line": 0.5,
    "curl_line": 0.4,
    "config_fragment": 0.5,
    "result": 0.4,
    "function": 0.6,
    "other exercise": 0.4,
    "decision": 0.3,
    "editor": 0.4,
}
# waits from their parts: (megabytes downloaded, seconds of work measured or stated, source)
WAIT_PARTS = {
    "SSH after the boot": (0, 180, "notebook 2: 'a few minutes' after ACTIVE"),
    "host setup (docker/setup_host.sh)": (
        250,
        150,
        "Docker Engine, the NVIDIA toolkit, nvtop from apt, ubuntu:24.04 for the check; "
        "cloud-init's own first-boot updates first",
    ),
    "model files (make artifacts-only)": (
        300,
        60,
        "CPU torch and the build (15 s on the GPU host)",
    ),
    "the FastAPI stack's images (in the background)": (
        3800,
        82,
        "CUDA torch wheels (~2.8 GB), Jupyter's base image and packages; builds 82 s here",
    ),
    "the FastAPI stack started (`up --build --wait`)": (0, 12, "`up --wait` 12 s here"),
    "the ONNX FastAPI image (in the background)": (250, 79, "onnxruntime-gpu; 79 s here"),
    "FastAPI container recreated (each switch)": (0, 12, "`up --wait` 12 s here"),
    "the Triton stack's images: NVIDIA's image pulled, built (in the background)": (
        10600,
        170,
        "~7.8 GB of compressed layers (15.5 GB on disk, at 2:1) and CUDA torch; unpacking 80 s, "
        "the build 90 s here",
    ),
    "the Triton stack started, both models loaded": (0, 12, "`up --wait` 12 s here"),
    "Flask container recreated (each switch)": (0, 12, "`up --wait` 12 s here"),
}


def _tokens(lines: list[str]) -> int:
    words = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            words += tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        words = sum(len(line.split()) for line in lines)
    return words


def _reading(cell: Cell, student: Student, lease: bool) -> float:
    """Seconds to read a markdown cell: its tables and blocks scanned, the rest by its purpose."""
    text = cell.source
    blocks = re.findall(r"```.*?```|^\|.*$", text, flags=re.S | re.M)
    scanned = sum(len(b.split()) for b in blocks)
    rest = max(0, cell.words() - scanned)
    gear = "scanning" if lease else ("memorizing" if ACT.search(text) else "learning")
    words_per_min = student.reads * GEARS[gear]
    return 60 * (rest / words_per_min + scanned / (student.reads * GEARS["scanning"]))


def _klm(sequence, student: Student) -> float:
    points, minds, typed, waited = sequence
    return student.slower * (points * P + minds * M + typed * student.keystroke) + waited


def _written(step: Step, cell: Cell, student: Student) -> float:
    """A solution region: typed, each name recalled and found, the check run, maybe again."""
    text = "\n".join(cell.solutions) or "x" * 20
    names = len(re.findall(r"--?[\w-]+|\w+", text))
    once = len(text.strip()) * student.keystroke + names * (M + P) + (P + M + 3)
    return student.slower * once * (1 + 0.5 * RETRY.get(step.kind, 0))


def _composed(questions: float, student: Student, rows: bool) -> float:
    per = 60 * student.words_per_answer / student.composes_wpm + (2 * (M + P) if rows else M)
    return questions * per


def seconds(step: Step, cell: Cell, student: Student, prepared_image: bool = False) -> float:
    """One step of the walkthrough, in seconds."""
    kind = step.kind
    if kind in ("read", "skim"):
        return _reading(cell, student, lease=kind == "skim")
    if kind == "read code":
        return 60 * _tokens(cell.read_lines()) / (student.reads * GEARS["memorizing"])
    if kind == "machine":
        return step.amount
    if kind == "output":  # what the runs printed, glanced at as it comes
        return 60 * step.amount / (student.reads * GEARS["scanning"])
    if kind == "wait":
        return wait_seconds(step, student, prepared_image)
    if kind == "background":  # a start: background.py times what it saves
        return 0.0
    if kind in ("answer", "hand-in", "question"):
        return _composed(step.amount, student, rows=kind != "question")
    if kind == "prediction":
        return 3 * M + 5 * student.keystroke + 60 * 10 / student.composes_wpm
    if kind in ("decision", "observation"):
        once = 3 * M + 2 * P + 5 * student.keystroke + (P + M + 3 if kind == "decision" else 0)
        return student.slower * once * (1 + 0.5 * RETRY.get(kind, 0))
    if kind == "editor":
        once = _klm((6, 6, 45 + 60, 2), student)  # the path, the edit, save, back, the check
        return once * (1 + 0.5 * RETRY["editor"])
    if kind == "try it":
        return _klm((4, 12, 150, 5), student)
    if kind in ("run cell", "run cell offline"):
        return student.keystroke + M + (3 if kind == "run cell" else 0)
    if kind in SEQUENCES:
        return _klm(SEQUENCES[kind], student) * (step.amount if kind == "terminal command" else 1)
    return _written(step, cell, student)


def wait_seconds(step: Step, student: Student, prepared_image: bool) -> float:
    """A wait from its parts; on the prepared image, what is left of it (the plan's figure)."""
    if step.what == "bare-metal boot":
        return 60 * student.boot
    wait = next(w for w in rules.WAITS if w.name == step.what)
    if prepared_image and wait.with_image < wait.minutes:
        return 60 * wait.with_image
    megabytes, work, _ = WAIT_PARTS[step.what]
    return megabytes / student.megabytes_per_s + work


def _found(name: str, prepared_image: bool) -> list[tuple[Step, Cell]]:
    """A notebook's steps as the plan finds them, with the output of each run, each with the
    cell (or the part of a markdown cell) it times."""
    all_cells = cells(name)
    parts = {(c.index, c.section): c for c in all_cells}
    first = {}
    for c in all_cells:  # a markdown cell cut at its headings: each part is a step of its own
        first.setdefault(c.index, c)
    steps, found = rule_plan.found(name, prepared_image)
    steps += [  # the output of each run, from what the reference's runs printed
        replace(s, kind="output", amount=s.amount / found.per_run * found.words_per_run)
        for s in steps
        if s.kind == "machine" and found.per_run
    ]
    return [(s, parts.get((s.cell, s.section), first[s.cell])) for s in steps]


def walked(
    names, student: Student, prepared_image: bool = False
) -> tuple[dict[str, dict[tuple, float]], background.Timeline]:
    """Minutes of these notebooks for one student, each by (pass, category) as the plan sums
    them, and the lease's timeline (the background build beside it, by the plan's rule)."""
    each = {name: _found(name, prepared_image) for name in names}
    steps = [s for name in names for s, _ in each[name]]
    minutes = {}
    for name in names:
        for step, cell in each[name]:
            minutes[step] = seconds(step, cell, student, prepared_image) / 60
    timeline = background.lease(steps, minutes.__getitem__, list(names))
    out, at = {}, 0
    for name in names:
        mine = [s for s, _ in each[name]]
        out[name] = rule_plan.tally(mine, timeline.costs[at : at + len(mine)])
        at += len(mine)
    return out, timeline


def walk(name: str, student: Student, prepared_image: bool = False) -> dict[tuple, float]:
    """One notebook on its own, for one student."""
    return walked([name], student, prepared_image)[0][name]


def pass_total(by: dict[tuple, float], pass_: str) -> float:
    return sum(m for (p, _), m in by.items() if p == pass_)


def walks(prepared_image: bool = False) -> dict[str, tuple[dict, background.Timeline]]:
    """{student: ({notebook: {(pass, category): minutes}}, the lease's timeline)}."""
    return {s.name: walked(rule_plan.NOTEBOOKS, s, prepared_image) for s in STUDENTS}


def estimate(prepared_image: bool = False) -> dict[str, dict[str, dict[tuple, float]]]:
    """{student: {notebook: {(pass, category): minutes}}}."""
    return {name: by for name, (by, _) in walks(prepared_image).items()}
