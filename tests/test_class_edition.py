"""`make class-edition` (labstack/class_edition.py): what students receive, built for real into a
temporary folder and inspected there. No answer in it; what its notebooks import, the node's
`make artifacts-only`, the Docker images and stacks find their files in it; it is a git
repository that Trovi can publish and the nodes can clone at REPO_REF."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from labstack import class_edition, editions
from servelab.paths import REPO_ROOT
from servelab.triton import config_text

MARKERS = (
    "### BEGIN SOLUTION",
    "### END SOLUTION",
    "### BEGIN HIDDEN TESTS",
    "### END HIDDEN TESTS",
)
REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION", re.M | re.S)
FIRST_PARTY = ("servelab", "labstack", "maintainers", "flask_app", "fastapi_pt", "fastapi_onnx")
GENERATED = ("artifacts", "results", "model_repository")  # made on the node: make, init_env.sh


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("class") / "edition"
    assert class_edition.build(out) == []
    return out


def _files(edition: Path) -> list[Path]:
    # __pycache__: Python's bytecode, written when another test runs the edition's code
    skipped = {".git", "__pycache__"}
    return [p for p in edition.rglob("*") if p.is_file() and not skipped & set(p.parts)]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_no_answer_key_no_sources_no_solved_notebooks_no_maintainers_tools(edition):
    for path in (
        "notebook_sources",
        "solutions",
        "docs/answer_key.md",
        "docs/results",
        "tests",
        "docs/instructors.md",
        "maintainers",
        "reliability",
        "gpu_reference",
        "labstack/figures",
        "labstack/timing",
        "labstack/script_runner.py",
        "scripts/bench_fastapi.py",
    ):
        assert not (edition / path).exists(), path
    for path in _files(edition):
        text = path.read_text(errors="replace")
        assert not [m for m in MARKERS if m in text], path
    notebooks = sorted(p.name for p in (edition / "notebooks").glob("*.ipynb"))
    assert notebooks == [f"{s.stem}.ipynb" for s in editions.sources()]
    assert not list((edition / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("source", editions.sources(), ids=lambda p: p.stem)
def test_every_answer_is_a_blank_in_the_editions_notebooks(edition, source):
    theirs = nbformat.read(edition / "notebooks" / f"{source.stem}.ipynb", as_version=4).cells
    for i, ours in enumerate(editions.solved(source).cells):
        for answer in REGION.findall(ours.source):
            assert editions.BLANK in theirs[i].source, f"{source.stem} cell {i}: no `...` left"
            for line in (ln.strip() for ln in answer.splitlines()):
                if (
                    len(line) > 3
                    and re.search(r"\w", line)
                    and not re.fullmatch(r"return \W", line)
                ):
                    assert line not in theirs[i].source, f"{source.stem} cell {i} shows {line}"


def _seen(path: Path) -> str:
    """A file's text as a reader sees it, without whitespace: a notebook's cells' sources."""
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        text = "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells)
    return re.sub(r"\s+", "", text)


def test_no_exercises_answer_is_anywhere_in_the_edition(edition):
    """Every solution region of notebook_sources/, whole or any line of it that is not an idiom
    (40 characters and more without spaces), is in no file of the edition: issue 43 found two
    lines of 5.2's answer in notebooks 6 and 7. Exceptions are the builder's ALLOWED, each with
    its reason."""
    files = {p.relative_to(edition).as_posix(): _seen(p) for p in _files(edition)}
    found = []
    for source in editions.sources():
        for answer in REGION.findall(source.read_text()):
            lines = [ln.strip() for ln in answer.splitlines() if re.search(r"\w", ln)]
            whole = re.sub(r"\s+", "", "\n".join(ln for ln in lines if not ln.startswith("#")))
            texts = [whole] if len(whole) >= 30 else []
            texts += [t for t in (re.sub(r"\s+", "", ln) for ln in lines) if len(t) >= 40]
            found += [
                f"{path}: {source.name}'s {lines[0]!r}"
                for path, seen in files.items()
                if any(t in seen for t in texts) and (path, lines[0]) not in class_edition.ALLOWED
            ]
    assert found == []


def test_notebook_8s_step_mapping_is_left_for_the_student(edition):
    config = "models_staging/food_classifier_ensemble/config.pbtxt"
    ours, theirs = (
        config_text.parse_config((d / config).read_text()) for d in (REPO_ROOT, edition)
    )
    assert len(ours.ensemble_scheduling.step) == 2 and len(theirs.ensemble_scheduling.step) == 0
    assert (theirs.input, theirs.output) == (ours.input, ours.output)


def test_the_check_finds_an_answer_and_a_marker():
    mapping = (REPO_ROOT / "models_staging/food_classifier_ensemble/config.pbtxt").read_text()
    tuned = "models_staging/food_classifier_tuned/config.pbtxt"
    # issue 43: two lines of 5.2's answer in a cell of another notebook
    leak = nbformat.v4.new_notebook()
    leak.cells = [
        nbformat.v4.new_code_cell(
            'image = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")\n'
            "image.set_data_from_numpy(np.array([[food11.encode_file(photo).encode()]], "
            "dtype=np.object_))\nprint(image)"
        )
    ]
    found = class_edition.check(
        {
            "docs/notes.md": mapping,
            "docs/how.md": "write it after\n### BEGIN SOLUTION\n",
            tuned: (REPO_ROOT / tuned).read_text(),  # allowed, with its reason
            "notebooks/06_triton_benchmarks.ipynb": nbformat.writes(leak),
        }
    )
    assert any(p.startswith("docs/notes.md: the answer of a region of 08_") for p in found)
    assert any(p.startswith("docs/how.md: nbgrader's marker") for p in found)
    assert not any(p.startswith(tuned) for p in found)
    assert any(
        p.startswith("notebooks/06_triton_benchmarks.ipynb: the answer of a region of 05_")
        for p in found
    )


def _imports_of_notebooks(edition: Path) -> list[str]:
    """Every import statement of the edition's notebooks (in functions and branches too)."""
    transform = TransformerManager().transform_cell
    found = set()
    for path in sorted((edition / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                tree = ast.parse(transform(cell.source))
                found |= {
                    ast.unparse(node)
                    for node in ast.walk(tree)
                    if isinstance(node, (ast.Import, ast.ImportFrom))
                }
    return sorted(found)


def _commands(edition: Path) -> set[str]:
    """First-party modules the edition runs: `-m name` in the notebooks, the Makefile and the
    Docker files, uvicorn's app modules, and what the Triton models' model.py import."""
    texts = [
        (edition / "Makefile").read_text(),
        *(p.read_text() for p in (edition / "docker").glob("*.y*ml")),
        *(p.read_text() for p in (edition / "docker").glob("Dockerfile.*")),
        *(p.read_text() for p in (edition / "notebooks").glob("*.ipynb")),
        *(p.read_text() for p in (edition / "models_staging").rglob("model.py")),
    ]
    names = set()
    for text in texts:
        names |= set(re.findall(r"""-m[\s",\\-]+([A-Za-z_][\w.]*)""", text))
        names |= set(re.findall(r"""\b([a-z_]+\.app):app\b""", text))
        names |= set(re.findall(r"^\s*(?:from|import) ([\w.]+)", text, re.M))
    return {n for n in names if n.split(".")[0] in FIRST_PARTY}


@pytest.mark.slow  # a Python that imports everything the notebooks import: about 5 s
def test_what_the_notebooks_and_services_import_is_in_the_edition(edition, tmp_path):
    """The notebooks' imports run in notebooks/ with the edition on the path (as the Docker
    Jupyter's PYTHONPATH and local mode's `pip install -e .` put it), and every module of the
    lab's own packages they load comes from the edition, none from this repository."""
    imports = _imports_of_notebooks(edition)
    assert "from servelab import exercises, labenv" in imports and "import chi_helpers" in imports
    commands = sorted(_commands(edition))
    assert {"labstack.model_analyzer", "labstack.artifacts", "flask_app.serve"} <= set(commands)
    program = "\n".join(
        [
            "import importlib.util, json, sys",
            "sys.modules.setdefault('rfc3987_syntax', None)",  # as tests/conftest.py says why
            *imports,
            f"missing = [m for m in {commands!r} if importlib.util.find_spec(m) is None]",
            f"ours = {FIRST_PARTY + ('lab_settings', 'chi_helpers')!r}",
            "files = {n: getattr(m, '__file__', None) for n, m in list(sys.modules.items())",
            "         if n.split('.')[0] in ours}",
            f"files.update({{m: importlib.util.find_spec(m).origin for m in {commands!r}}})",
            "print(json.dumps({'missing': missing, 'files': files}))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=edition / "notebooks",
        env={**os.environ, "PYTHONPATH": str(edition), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["missing"] == []
    outside = {n: f for n, f in found["files"].items() if f and edition not in Path(f).parents}
    assert outside == {}, "imported from outside the class edition"


def test_the_node_and_the_docker_stacks_find_their_files(edition):
    """What notebook 2 runs on the node, what the Dockerfiles copy and the compose files mount,
    and the packages `pip install -e .` installs, are all there."""
    for path in ("docker/setup_host.sh", "docker/init_env.sh", "requirements/artifacts.txt"):
        assert (edition / path).is_file(), path
    setuptools = tomllib.loads((edition / "pyproject.toml").read_text())["tool"]["setuptools"]
    for pattern in setuptools["packages"]["find"]["include"]:  # "servelab*": it and its packages
        assert (edition / pattern.rstrip("*") / "__init__.py").is_file(), pattern
    for dockerfile in (edition / "docker").glob("Dockerfile.*"):
        if dockerfile.suffix == ".dockerignore":
            continue
        for source in re.findall(r"^COPY (?:--\S+ )*(\S+) ", dockerfile.read_text(), re.M):
            assert (edition / source).exists(), f"{dockerfile.name}: COPY {source}"
    for compose in (edition / "docker").glob("docker-compose-*.yaml"):
        for mount in re.findall(r"^\s*- \.\./([\w./-]+):", compose.read_text(), re.M):
            assert mount in GENERATED or (edition / mount).exists(), f"{compose.name}: {mount}"


def test_the_makefile_has_the_students_targets_only(edition):
    def make(*args):
        return subprocess.run(["make", "-n", *args], cwd=edition, capture_output=True, text=True)

    built = make("artifacts-only", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu")
    assert built.returncode == 0 and "-m labstack.artifacts" in built.stdout, built.stderr
    assert make("up").returncode == 0 and make("down").returncode == 0
    maintainers = ("bench", "reliability", "soak", "timing", "figures")
    for target in (
        "lab",
        "test",
        "test-docker",
        "solutions",
        "notebooks",
        "class-edition",
        *maintainers,
    ):
        done = make(target)  # notebooks/ is a folder: "Nothing to be done" for it
        assert "No rule to make target" in done.stderr or "Nothing to be done" in done.stdout
    shown = subprocess.run(["make"], cwd=edition, capture_output=True, text=True).stdout
    assert "make up" in shown and "make lab" not in shown and "make test" not in shown
    assert not [t for t in maintainers if f"make {t}" in shown]


def test_a_git_repository_with_one_commit_and_nothing_left_over(edition):
    assert _git(edition, "status", "--porcelain") == ""
    assert _git(edition, "rev-list", "--count", "HEAD") == "1"
    tracked = set(_git(edition, "ls-files").splitlines())
    assert tracked == {p.relative_to(edition).as_posix() for p in _files(edition)}
    assert "Class edition of " in _git(edition, "log", "-1", "--format=%s")


def test_the_commit_is_tagged_repo_ref_and_a_reused_tag_stops_it(edition, tmp_path):
    copy = tmp_path / "class"
    shutil.copytree(edition, copy)
    settings = copy / "notebooks/lab_settings.py"
    settings.write_text(settings.read_text().replace('REPO_REF = ""', 'REPO_REF = "v9.9"', 1))
    class_edition.commit(copy)
    assert _git(copy, "rev-parse", "v9.9^{commit}") == _git(copy, "rev-parse", "HEAD")
    class_edition.commit(copy)  # nothing changed: the same commit, the same tag
    assert _git(copy, "rev-list", "--count", "HEAD") == "2"
    (copy / "README.md").write_text("changed\n")
    with pytest.raises(SystemExit, match="tag v9.9 already names an older commit"):
        class_edition.commit(copy)


def test_it_never_writes_over_the_repository_or_a_folder_of_other_files(tmp_path):
    with pytest.raises(SystemExit, match="holds this repository"):
        class_edition._empty_out(REPO_ROOT)
    with pytest.raises(SystemExit, match="holds this repository"):
        class_edition._empty_out(REPO_ROOT.parent)
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="neither empty nor a git repository"):
        class_edition._empty_out(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_nothing_is_written_while_a_check_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(class_edition, "check", lambda texts: ["notebooks/x.ipynb is stale"])
    assert class_edition.build(tmp_path / "edition") == ["notebooks/x.ipynb is stale"]
    assert not (tmp_path / "edition").exists()


# ---------------------------------------------------------------- the exercises' key, sealed

# made on the node when the lab runs (make, init_env.sh, the notebooks): not in any edition
MADE_WHEN_RUN = ("artifacts/", "results/", ".lab/", "model_repository/", "docker/.env")
TOP_LEVEL = (
    ".lab", "artifacts", "dist", "docker", "docs", "fastapi_onnx", "fastapi_pt", "flask_app",
    "labstack", "maintainers", "model_repository", "models_staging", "notebook_sources",
    "notebooks", "requirements", "results", "scripts", "servelab", "solutions", "tests",
)  # fmt: skip
CITED = re.compile(rf"(?<![\w./-])((?:{'|'.join(map(re.escape, TOP_LEVEL))})/[\w./-]*[\w/])")


def _plain_pairs() -> dict[str, list[str]]:
    """Each step's needs as they would read in plain text: `-b 16`, `"-b": 16`, a field's
    `max_queue_delay_microseconds: 100`, a URL's path, a call's method."""
    from servelab.exercises import answer_key

    pairs = {}
    for step, needs in answer_key.NEEDS.items():
        shown = []
        for field, value in needs.items():
            if hasattr(value, "placed"):  # instances: judged by where Triton puts them
                continue
            if field == "url":
                shown.append(str(value).split("}", 1)[-1])
            elif field == "call.method":
                shown.append(f"{value}(")
            elif value is not None and not field.startswith("call."):
                name = field.split(".")[-1]
                shown += [f"{field} {value}", f'"{field}": {value!r}', f"{name}: {value}"]
        pairs[step] = shown
    return pairs


def test_the_editions_answer_key_is_sealed_and_no_answer_is_plain(edition):
    """The class edition checks every exercise without holding its expected answer in plain text:
    its servelab/exercises/answer_key.py holds salted digests only, and no file of its
    servelab/exercises/ (the checks, the table) holds a step's value as an answer would write it."""
    key_file = edition / class_edition.ANSWER_KEY
    tree = ast.parse(key_file.read_text())
    names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    assert names == {"SALT", "SEALED"}
    sealed = ast.literal_eval(tree.body[-1].value)
    for step, entry in sealed.items():
        assert set(entry) == {"count", "digests", "uses"}, step
        assert all(re.fullmatch(r"[0-9a-f]{24}", d) for d in entry["digests"]), step
        assert all(re.fullmatch(r"[A-Z_]+", name) for name in entry["uses"]), step
    texts = {p: p.read_text() for p in (edition / "servelab/exercises").glob("*.py")}
    found = [
        f"{path.name}: {step}'s {pair!r}"
        for step, pairs in _plain_pairs().items()
        for pair in pairs
        for path, text in texts.items()
        if pair in text
    ]
    assert found == []


def test_the_edition_checks_answers_with_the_sealed_key(edition, tmp_path):
    """In the edition, with its sealed key, a right line passes (perf_analyzer's default left
    out), a wrong one is refused pointing to its section, and so are a fragment and a curl line."""
    program = "\n".join(
        [
            "from servelab import exercises",
            "from servelab.exercises import NotYet, steps",
            "assert steps.sealed()",
            "exercises.given(HOST='h:8000', TRITON='http://h:8000', PERF_INPUT='in.json')",
            "exercises.given(N_GPUS=2)",
            "base = 'perf_analyzer -m food_classifier -u h:8000 --input-data in.json'",
            "exercises.perf_line(base, '6.1a')",
            "exercises.perf_line(base + ' --concurrency-range 8', '6.1b')",
            "exercises.config_fragment('instance_group [ { count: 4, gpus: [ 0 ] } ]', '6.3d')",
            "said = []",
            "for check in (",
            "    lambda: exercises.perf_line(base, '6.1b'),",
            "    lambda: exercises.config_fragment('instance_group [ { count: 4 } ]', '6.3d'),",
            "    lambda: exercises.curl_line('curl http://h:8000/v2/models/food_classifier/stats"
            " | python -m json.tool', '6.1d'),",
            "):",
            "    try:",
            "        check()",
            "    except NotYet as exc:",
            "        said.append(str(exc))",
            "print('\\n'.join(said))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=edition / "notebooks",
        env={**os.environ, "PYTHONPATH": str(edition), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.splitlines()
    assert len(said) == 3, said
    assert said[0].startswith("6.1b: your line keeps 1 request in flight") and "8" not in said[0]
    assert "puts 4 on GPU 0 and 4 on GPU 1, not where the step puts them" in said[1]
    assert "asks for `/v2/models/food_classifier/stats`, not what the step reads" in said[2]


def test_every_path_a_notebook_cites_is_in_the_edition(edition):
    """A path the edition's notebooks cite (prose, code, printed text) is there for the student
    to open, unless the lab makes it when it runs (artifacts/, results/, ...)."""
    missing = []
    for path in sorted((edition / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for cited in CITED.findall(cell.source):
                if not cited.startswith(MADE_WHEN_RUN) and not (edition / cited).exists():
                    missing.append(f"{path.name}: {cited}")
    assert missing == []
    assert CITED.findall("see `docs/results/h100/06_triton_benchmarks/` and servelab/perf/")


def test_no_issue_number_in_what_students_read(edition):
    for path in sorted((edition / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            assert not re.search(r"\b[Ii]ssues? #?\d+", cell.source), (path.name, cell.source)
