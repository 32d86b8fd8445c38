"""What a student does in a notebook, step by step, found in its source: each reading, each line
written, each question answered, each browser, SSH, editor or terminal step, each wait, each cell
run, with the pass it is done in.

Nothing here is a marker added to the notebooks: the steps are read off what the notebooks
already say and call, so a line, an edit or a question added to a notebook is counted when it
lands. What is recognised, and how:

- a solution region, by the check after it (`exercises.perf_line(`, `judgement.verdict_after(`,
  ...): the kind of thing written; an answer by the questions of the prompt above it;
- `claims.predict(`: a prediction; `exercises.file_edit(`: an edit made in an editor;
- `services.use_fastapi_backend(`, `use_flask_triton_model(`, `ask_host(`: a command the cell
  prints for the node's terminal; each command line of a ```bash block, and "on the host: `...`";
- in the prose: "ssh -L" (a tunnel), "*Try it out*" (Swagger), "Open the Flask page",
  "**Jupyter URL.**", "In a terminal on the node" (nvtop), "`nvidia-smi` on the node",
  "Copy the ssh command", "**Question.**", "Try it:", "**Hand in**", "**Your observation.**";
- the waits of rules.WAITS, each at its anchor, and where notebook 2 starts the background
  build of the class's images (rules.BACKGROUND_START).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from maintainers.timing import rules
from maintainers.timing.notebook import Cell
from servelab.passes.choice import MEASURE, PREPARE, REVIEW

# prose that asks for a step outside the notebook: (kind, what, pattern)
PROSE_STEPS = (
    ("ssh login", "the printed ssh command, from your computer", r"Copy the ssh command into"),
    ("tunnel", "an SSH tunnel to the node", r"ssh -L \d+"),
    ("swagger", "Swagger UI: POST /predict by hand", r"\*Try it out\*"),
    ("browser page", "the Flask page: upload a photo", r"Open the Flask page"),
    ("jupyter url", "the lab's Jupyter URL, opened", r"\*\*Jupyter URL\.\*\*"),
    ("node terminal", "nvtop in a terminal on the node", r"[Ii]n a terminal on the node"),
    ("nvidia-smi", "nvidia-smi on the node", r"`nvidia-smi` on the node"),
    ("terminal command", "a command on the host", r"[Oo]n the host: `docker compose"),
)
HOST_CALL = re.compile(r"services\.(use_fastapi_backend|use_flask_triton_model|ask_host)\(")
CHECK = re.compile(r"\b(exercises|judgement)\.(\w+)\(")
DECISIONS = ("decide", "fewest_near_best", "bottleneck", "choice", "number_in")
INTERROGATIVE = r"(?:what|how|which|why|where|when|who|did|does|do|is|was|were|could|would|can)"
CLAUSE = re.compile(
    rf"(?:^|[.?!]\s+|[,;:]\s+(?:and\s+|or\s+|so\s+)?|\band\s+){INTERROGATIVE}\b", re.I
)


@dataclass(frozen=True)
class Step:
    notebook: str
    cell: int  # the cell it belongs to (its index in the notebook)
    section: str
    pass_: str  # prepare, measure or review
    kind: str  # a key of rules.MINUTES, "read", "read code", "skim", "wait", "background" (the
    # start of the background build) or "machine"
    amount: float = 1.0  # words, lines, questions, minutes (a wait) or seconds (machine)
    what: str = ""


def questions(text: str) -> int:
    """The questions a prompt asks: each interrogative clause of its sentences that end in '?'
    ("How busy was it, and how many waited?" is two), the "What do you see, and why?" heading
    left out."""
    text = re.sub(r"\*\*What do you see, and why\?\*\*", "\n\n", text)
    text = re.sub(r"```.*?```|`[^`\n]*`", "x", text, flags=re.S)  # code is not a question
    sentences = [
        sentence
        for paragraph in re.split(r"\n\s*\n", text)
        for sentence in re.split(r"(?<=[.?!])\s+", " ".join(paragraph.split()))
    ]
    return sum(len(CLAUSE.findall(s)) or 1 for s in sentences if s.endswith("?"))


def bash_commands(markdown: str) -> int:
    """Command lines of the ```bash blocks in a markdown cell (comments and blanks left out)."""
    blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)
    return sum(
        1 for b in blocks for line in b.splitlines() if line.strip() and not line.startswith("#")
    )


def _check_after(code_cells: list[Cell], i: int) -> tuple[str, str] | None:
    """(module, function) of the check that reads cell i's solution: in it or the next cell."""
    for cell in code_cells[i : i + 2]:
        for module, name in CHECK.findall(cell.code):
            if module == "judgement" or name in rules.MINUTES:
                return module, name
    return None


def _written(cell: Cell, check, prompt: dict) -> Step:
    """The step of one solution region, by the check after it."""
    module, name = check or ("exercises", "other exercise")
    if module == "judgement" and name == "verdict_after":
        kind, amount = "answer", max(1, prompt.pop("questions", 1))
    elif module == "judgement" and name in DECISIONS:
        kind, amount = ("observation" if prompt.pop("observation", False) else "decision"), 1
    elif name == "function":
        kind, amount = "function", max(0, len(cell.solutions[0].strip().splitlines()) - 1)
    else:
        kind, amount = (name if name in rules.MINUTES else "other exercise"), 1
    where = rules.PASS_OF_KIND.get(kind) or (PREPARE if PREPARE in cell.passes else cell.passes[0])
    return Step(cell.notebook, cell.index, cell.section, where, kind, amount, name)


def _prose_steps(cell: Cell, prompt: dict, read_pass: str) -> list[Step]:
    def step(pass_, kind, amount=1.0, what=""):
        return Step(cell.notebook, cell.index, cell.section, pass_, kind, amount, what)

    text = cell.source
    out = [step(read_pass, "read", cell.words())]
    if read_pass == PREPARE:
        out.append(step(MEASURE, "skim", cell.words()))
    out += [
        step(MEASURE, kind, 1, what)
        for kind, what, pattern in PROSE_STEPS
        if re.search(pattern, text)
    ]
    if bash_commands(text):
        out.append(step(MEASURE, "terminal command", bash_commands(text), "```bash block"))
    if "**Question.**" in text:
        asked = text.split("**Question.**", 1)[1].split("**Your answer:**")[0]
        out.append(step(PREPARE, "question", questions(asked), "a question in the prose"))
        if "Try it" in asked:
            out += [step(PREPARE, "try it", 1, "your own lines"), step(MEASURE, "run cell")]
    if "**Hand in**" in text:
        items = re.findall(r"^\d+\. (.*?)(?=^\d+\. |\Z|^#)", text, flags=re.M | re.S)
        out.append(step(REVIEW, "hand-in", sum(max(1, questions(i)) for i in items), "hand-in"))
    if "What do you see, and why?" in text:
        prompt["questions"] = questions(text)
    prompt["observation"] = "**Your observation.**" in text
    return out


def _code_steps(cell: Cell, code_cells: list[Cell], prompt: dict, read_pass: str) -> list[Step]:
    def step(pass_, kind, amount=1.0, what=""):
        return Step(cell.notebook, cell.index, cell.section, pass_, kind, amount, what)

    out = [step(read_pass, "read code", len(cell.read_lines()))]
    for p in cell.passes:
        out.append(step(p, "run cell" if p == MEASURE else "run cell offline"))
    i = code_cells.index(cell)
    if cell.solutions:
        out.append(_written(cell, _check_after(code_cells, i), prompt))
    out += [step(PREPARE, "prediction", 1, "claims.predict")] * cell.code.count("claims.predict(")
    # a file edit is made in the editor in prepare, on the notebook's copy; the measure pass
    # makes the same edit in the node's file (servelab.triton.triton_config.to_edit)
    edits = cell.code.count("exercises.file_edit(")
    out += [
        step(PREPARE if PREPARE in cell.passes else MEASURE, "editor", 1, "config.pbtxt")
    ] * edits
    if MEASURE in cell.passes:
        out += [step(MEASURE, "host command", 1, m) for m in HOST_CALL.findall(cell.code)]
        if "if DELETE_SERVER:" in cell.code:
            out.append(step(MEASURE, "clean-up", 1, "delete the server"))
    if "passes.start(" in cell.code:
        out += [step(p, "open notebook") for p in (PREPARE, MEASURE, REVIEW)]
    return out


def waits(cells: list[Cell], prepared_image: bool = False) -> list[Step]:
    """Each wait of rules.WAITS at its anchor in the class path of these cells, and the start of
    the background build (a step of no minutes of its own: background.py times what it saves)."""
    out = []
    for wait in rules.WAITS:
        hits = [
            c
            for c in cells
            if c.notebook == wait.notebook and MEASURE in c.passes
            for _ in re.finditer(wait.anchor, c.source)
        ]
        for cell in hits if wait.every else hits[:1]:
            minutes = wait.with_image if prepared_image else wait.minutes
            out.append(
                Step(cell.notebook, cell.index, cell.section, MEASURE, "wait", minutes, wait.name)
            )
    starts = [
        c
        for c in cells
        if c.notebook == rules.BACKGROUND_NOTEBOOK
        and MEASURE in c.passes
        and re.search(rules.BACKGROUND_START, c.source)
    ]
    for cell in starts[:1]:
        what = rules.BACKGROUND_NAME
        out.append(Step(cell.notebook, cell.index, cell.section, MEASURE, "background", 0, what))
    return out


def find(cells: list[Cell], prepared_image: bool = False) -> list[Step]:
    """Every step of a notebook's class path (the core, on the Docker route)."""
    path = [c for c in cells if c.class_path]
    code_cells = [c for c in path if c.kind == "code"]
    # a notebook without passes runs in the lease: it is read there, while the node boots
    read_pass = PREPARE if any(len(c.passes) > 1 for c in path) else MEASURE
    prompt: dict = {}
    out: list[Step] = []
    for cell in path:
        if cell.kind == "markdown":
            out += _prose_steps(cell, prompt, read_pass)
        else:
            out += _code_steps(cell, code_cells, prompt, read_pass)
    return out + waits(path, prepared_image)
