"""The class edition: what students receive. Trovi publishes it and the class's nodes clone it.

    python -m labstack.class_edition [OUT]     # make class-edition; OUT: dist/class_edition/

It is this repository's tracked files as they are in the working tree, less what holds the
answers, runs the solved edition or serves only the maintainers (LEFT_OUT, each with its reason),
with five files made for it (made()): the README (docs/class_edition/README.md), the Makefile down
to its instructors' part, pyproject.toml without the packages left out, notebook 8's ensemble
config without the step mapping that exercise 8.1 has students write, and the exercises' answer
key sealed (servelab/exercises/answer_key.py as salted digests: the checks compare each answer
with it through servelab/exercises/key.py, and the edition holds no expected answer in plain text).
Every top-level entry of the repository is in KEPT or LEFT_OUT: a new one stops the build until
someone decides where it goes.

Nothing is written until the edition passes check(): no nbgrader marker in any file; no solution
region's text in any file, the notebooks' cells included (a region's whole text, or one of its
lines long enough to be an answer rather than an idiom: issue 43 found two lines of 5.2's answer
in notebooks 6 and 7; ALLOWED lists the exceptions, with why); notebooks/ is the student edition
of notebook_sources/ as they are now (else `make notebooks`).

OUT ends up a git repository with one new commit (a fresh repository the first time; in a clone
of the class's repository, on top of its history), tagged with REPO_REF of
notebooks/lab_settings.py when that is set. Pushing it is the instructor's step
(docs/instructors.md).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from labstack import editions
from servelab.exercises import steps
from servelab.paths import REPO_ROOT
from servelab.triton import config_text

DEFAULT_OUT = REPO_ROOT / "dist" / "class_edition"
# top-level entries students get (inside them, LEFT_OUT still applies)
KEPT = {
    ".gitignore", "Makefile", "README.md", "pyproject.toml", "docs", "docker", "fastapi_onnx",
    "fastapi_pt", "flask_app", "labstack", "models_staging", "notebooks", "requirements",
    "scripts", "servelab",
}  # fmt: skip
LEFT_OUT = {
    "notebook_sources/": "the notebooks' sources: every answer, between nbgrader's markers",
    "docs/answer_key.md": "the answers to every prediction and question",
    "docs/instructors.md": "the instructors' guide: it sums up what the GPU reference showed, "
    "notebook 7's hand-in answer among it",
    "docs/results/": "the GPU reference runs of the solved notebooks: their logs print the "
    "answers (each perf_analyzer line, each config) and their pages every claim's verdict",
    "docs/class_edition/": "the edition's own README, put at its top",
    "tests/": "the test suite: it writes answers (notebooks 6 and 7's configs) and runs the "
    "solved edition (make test, make test-docker)",
    "maintainers/": "the maintainers' wing: the reference runs of the solved notebooks and their "
    "pages (notebook 7's configs), the reliability suite, the lease plan (it counts the answers in "
    "notebook_sources/), the quoted figures (from docs/results/), the experiments",
    ".ci/": "CI's script: the test tiers, which need the solved edition",
    "CONTRIBUTING.md": "the maintainers' notes: commits, the test tiers, the reference pages",
    "labstack/editions.py": "makes both editions from notebook_sources/",
    "labstack/lab.py": "make lab: runs the solved edition",
    "labstack/notebook_runner.py": "runs the solved edition for make lab and the tests",
    "labstack/class_edition.py": "this builder",
}  # and servelab/exercises/answer_key.py is replaced by its sealed form (made())
ENSEMBLE_CONFIG = "models_staging/food_classifier_ensemble/config.pbtxt"
ANSWER_KEY = "servelab/exercises/answer_key.py"
# what pyproject.toml's package search includes that stays out (the rest is found where it is), and
# where its maintainers' part starts (the import-linter contracts name the packages left out)
PACKAGES_LEFT_OUT = ("maintainers*",)
PYPROJECT_CUT = "# Layers import downward only"
MAKEFILE_CUT = "# ==== instructors and maintainers"  # the Makefile's line where the edition's ends
MARKERS = tuple(f"### {b} {k}" for k in ("SOLUTION", "HIDDEN TESTS") for b in ("BEGIN", "END"))
REGION = re.compile(
    r"^[ \t]*### BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)^[ \t]*### END \1", re.M | re.S
)
# an answer shows when a region's whole text does (this long or more, without whitespace), or one
# of its lines this long: shorter lines are idioms (`start = time.perf_counter()`) that any code
# may hold
REGION_CHARS, LINE_CHARS = 30, 40
# (file, the region's first line): an answer's text that may show there, and why
ALLOWED = {
    ("models_staging/food_classifier_tuned/config.pbtxt", "dynamic_batching {"): (
        "notebook 7's model starts with dynamic batching; 6.6d's prose gives every value of its "
        "block (preferred 4, 6, 8; at most 100 us), so the block transcribes them"
    ),
    ("notebooks/06_triton_benchmarks.ipynb", 'placed_now.get("GPU 0", placed_now.get("CPU", 0))'): (
        "decision 6.3's answer is a count the student reads off nvidia-smi; the solved edition "
        "stands in with Triton's placement, which the check cell compares the count with"
    ),
}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


def left_out(path: str) -> str | None:
    """Why `path` (relative, /-separated) stays out of the edition; None if it goes in."""
    return next((why for p, why in LEFT_OUT.items() if path == p or path.startswith(p)), None)


def gathered() -> dict[str, Path]:
    """Every tracked file of the working tree that goes in, by its path in the edition."""
    paths = _git(REPO_ROOT, "ls-files", "-z").split("\0")
    files = [p for p in paths if p and (REPO_ROOT / p).is_file()]
    undecided = sorted({p.split("/")[0] for p in files} - KEPT - {k.rstrip("/") for k in LEFT_OUT})
    if undecided:
        raise SystemExit(
            f"Does the class edition get {', '.join(undecided)}? Add each to KEPT or LEFT_OUT "
            "in labstack/class_edition.py."
        )
    return {p: REPO_ROOT / p for p in files if p.split("/")[0] in KEPT and not left_out(p)}


def pyproject() -> str:
    """pyproject.toml for the edition: its package search without PACKAGES_LEFT_OUT, without the
    maintainers' import contracts."""
    text = (REPO_ROOT / "pyproject.toml").read_text()
    if PYPROJECT_CUT not in text:
        raise SystemExit(f"pyproject.toml: no line starting {PYPROJECT_CUT!r}")
    text = text[: text.index(PYPROJECT_CUT)].rstrip() + "\n"
    found = re.search(r"^include = \[(.*)\]$", text, re.M)
    if not found:
        raise SystemExit("pyproject.toml: no `include = [...]` of [tool.setuptools.packages.find]")
    globs = [g.strip().strip('"') for g in found[1].split(",") if g.strip()]
    kept = ", ".join(f'"{g}"' for g in globs if g not in PACKAGES_LEFT_OUT)
    return text[: found.start()] + f"include = [{kept}]" + text[found.end() :]


def made() -> dict[str, str]:
    """The files the edition has in place of the repository's."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    if MAKEFILE_CUT not in makefile:
        raise SystemExit(f"Makefile: no line starting {MAKEFILE_CUT!r} to end the edition's part")
    ensemble = (REPO_ROOT / ENSEMBLE_CONFIG).read_text()
    return {
        "README.md": (REPO_ROOT / "docs/class_edition/README.md").read_text(),
        "Makefile": makefile[: makefile.index(MAKEFILE_CUT)].rstrip() + "\n",
        "pyproject.toml": pyproject(),
        ENSEMBLE_CONFIG: config_text.replace_fields(ensemble, "", ("ensemble_scheduling",))
        + "# ensemble_scheduling { ... }: the step mapping, which you write in notebook 8 (8.1)\n",
        ANSWER_KEY: sealed_answer_key(),
    }


def sealed_answer_key() -> str:
    """servelab/exercises/answer_key.py for the edition: the plain key's needs as salted digests
    (steps.sealed_key). The salt is the plain key's own digest, so an unchanged key seals the same
    and a rebuilt edition commits nothing new."""
    plain = (REPO_ROOT / ANSWER_KEY).read_text()
    salt = hashlib.sha256(plain.encode()).hexdigest()[:16]
    sealed = json.dumps(steps.sealed_key(salt), indent=1, sort_keys=True)
    return (
        '"""The answer key of the exercises, sealed: what each step\'s answer sets, as salted\n'
        "digests (made by `make class-edition`; servelab/exercises/key.py compares each answer\n"
        'with them, so the checks work without the answers written here)."""\n\n'
        f"SALT = {salt!r}\nSEALED = {sealed}\n"
    )


def _plain(text: str) -> str:
    """Code without comments, quotes' triple marks and whitespace: an answer as it would show."""
    return re.sub(r"\s+", "", re.sub(r"#[^\n]*", "", text.replace('"""', "")))


def answers() -> list[tuple[str, str, list[str]]]:
    """(source file, first line, plain texts) of every solution and hidden-test region: the
    texts that would show it, its whole text and each of its lines long enough to."""
    found = []
    for source in editions.sources():
        for m in REGION.finditer(source.read_text()):
            lines = [ln.strip() for ln in m.group(2).splitlines()]
            first = next((ln for ln in lines if re.search(r"\w", ln)), "")
            whole = _plain(m.group(2))
            shown = [whole] if len(whole) >= REGION_CHARS else []
            shown += [p for p in map(_plain, lines) if len(p) >= LINE_CHARS and p != whole]
            found.append((source.name, first, shown))
    return found


def visible(path: str, text: str) -> str:
    """What a reader sees in a file: a notebook's cell sources, any other file's text."""
    if not path.endswith(".ipynb"):
        return text
    return "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])


def check(texts: dict[str, str]) -> list[str]:
    """What in the edition (path -> text; binary files left out) would show an answer."""
    problems = [
        f"{path}: nbgrader's marker {marker!r}"
        for path, text in texts.items()
        for marker in MARKERS
        if marker in text
    ]
    regions = answers()
    for path, text in texts.items():
        plain = _plain(visible(path, text))
        problems += [
            f"{path}: the answer of a region of {source} ({first!r} ...)"
            for source, first, shown in regions
            if any(answer in plain for answer in shown) and (path, first) not in ALLOWED
        ]
    for source in editions.sources():
        name = f"notebooks/{source.stem}.ipynb"
        if texts.get(name) != editions.text(editions.student(source)):
            problems.append(f"{name} is not the student edition of {source.name}: make notebooks")
    return problems


def _settings(edition: Path) -> dict[str, str]:
    """REPO_URL, REPO_REF, PROJECT as notebooks/lab_settings.py sets them (read, not run)."""
    tree = ast.parse((edition / "notebooks/lab_settings.py").read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("REPO_URL", "REPO_REF", "PROJECT")
        and isinstance(node.value, ast.Constant)
    }


def _empty_out(out: Path) -> None:
    """OUT ready to hold the edition: absent, empty, or a git repository of a class edition."""
    out = out.resolve()
    if out == REPO_ROOT or out in REPO_ROOT.parents:
        raise SystemExit(f"{out} holds this repository: build the class edition elsewhere")
    if out.is_dir() and any(out.iterdir()):
        if not (out / ".git").exists():
            raise SystemExit(f"{out} is neither empty nor a git repository: empty it first")
        if (out / "notebook_sources").exists():
            raise SystemExit(f"{out} has notebook_sources/: the full repository, not an edition")
        for entry in out.iterdir():
            if entry.name == ".git":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    out.mkdir(parents=True, exist_ok=True)


def build(out: Path = DEFAULT_OUT) -> list[str]:
    """Write the class edition into `out` and commit it; returns what stops it (nothing written)
    or [] when done."""
    files, own = gathered(), made()
    texts = {}
    for path, src in files.items():
        try:
            texts[path] = src.read_text()
        except UnicodeDecodeError:
            pass  # an image: no answer to look for
    problems = check({**texts, **own})
    if problems:
        return problems
    _empty_out(out)
    for path, src in files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out / path)
    for path, text in own.items():
        (out / path).write_text(text)
    commit(out)
    return []


def commit(out: Path) -> None:
    """One commit of what `out` holds now, tagged REPO_REF when lab_settings.py sets one."""
    if not (out / ".git").exists():
        _git(out, "init", "--quiet", "--initial-branch=main")
    who = []  # the instructor's git identity; a stand-in where git has none
    if subprocess.run(
        ["git", "-C", str(out), "var", "GIT_COMMITTER_IDENT"], capture_output=True
    ).returncode:
        who = ["-c", "user.name=make class-edition", "-c", "user.email=class-edition@localhost"]
    _git(out, "add", "--all")
    if _git(out, "status", "--porcelain"):
        source = _git(REPO_ROOT, "describe", "--always", "--dirty", "--tags")
        _git(
            out, *who, "commit", "--quiet", "-m", f"Class edition of {source} (make class-edition)"
        )
    ref = _settings(out).get("REPO_REF", "")
    if ref and not re.fullmatch(r"[0-9a-f]{40}", ref):
        tag = ["rev-parse", "--verify", "--quiet", f"refs/tags/{ref}^{{commit}}"]
        tagged = subprocess.run(["git", "-C", str(out), *tag], capture_output=True, text=True)
        tagged = tagged.stdout.strip()
        if not tagged:
            _git(out, "tag", ref)
        elif tagged != _git(out, "rev-parse", "HEAD"):
            raise SystemExit(
                f"tag {ref} already names an older commit of {out}: set a new REPO_REF in "
                "notebooks/lab_settings.py, commit, and build again"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    problems = build(args.out)
    if problems:
        print("No class edition written:", *problems, sep="\n- ")
        return 1
    settings = _settings(args.out)
    head = _git(args.out, "log", "-1", "--format=%h %s")
    print(f"class edition: {args.out} ({len(_git(args.out, 'ls-files').splitlines())} files)")
    print(f"commit {head}" + (f", tag {settings['REPO_REF']}" if settings.get("REPO_REF") else ""))
    print("left out:", *(f"{p} ({why})" for p, why in LEFT_OUT.items()), sep="\n  ")
    unset = [k for k in ("REPO_URL", "REPO_REF", "PROJECT") if not settings.get(k)]
    if unset:
        print(
            f"notebooks/lab_settings.py sets no {', '.join(unset)}: notebooks 1 and 2 refuse to "
            "start without them. Set them, commit, and build again (docs/instructors.md)."
        )
    target = settings.get("REPO_URL") or "<the class's repository>"
    print(f"to publish: git -C {args.out} push {target} HEAD:main --tags (docs/instructors.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
