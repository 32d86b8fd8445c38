"""One student's journey across the three passes, on the class's real files (issue 50), walked
once and asserted at each hand-over:

1. the class edition (what Trovi publishes) is the student's folder in Chameleon's Jupyter;
   notebook 6's prepare pass runs there, in an environment made by notebook 0's commands
   (tests/review_venv.py), with the solved edition's answers (its editor edits made on the
   prepare copies of config.pbtxt); the notebook the student keeps holds their answers, not the
   edits (those live in prepared.json);
2. notebooks 1 and 2 run against the fake Chameleon; notebook 2 carries the notebook and its
   prepared.json to the node's clone (tests/fake_chameleon/scenarios.py, journey);
3. the measure pass runs the carried notebook on the node, its model repository built as the
   node builds it (Docker mode's files) and two GPUs by stand-in (tests/journey_node.py); the
   lease ends in the middle of notebook 6, after 6.3f (the chain 6.3a -> 6.3d -> 6.3f);
4. notebook 2's clean-up brings the bundles back; the review pass runs in Chameleon's Jupyter
   from where they landed, with no setting.

Asserted: every prepared edit the lease reached was made on the node's own file without asking
the student to make it by hand; the review printed the verdict of every step measured, as the
measure pass did, and named the steps not measured."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import review_venv as venvs
from fake_chameleon.results import needs_namespace, run, scenario, text
from nbgrader.preprocessors import ClearHiddenTests

from labstack import class_edition, editions

pytestmark = [needs_namespace, pytest.mark.slow]
NOTEBOOK = "06_triton_benchmarks"
TESTS = Path(__file__).resolve().parent
EDITS = ("6.3a", "6.3f")  # the file edits before the lease ends (6.4b, 6.6a, 6.6e: after it)
ASKS = "make it in the editor"  # what the measure pass prints when it leaves an edit to you


@pytest.fixture(scope="module")
def journey(review_venv, built_artifacts, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("journey")
    edition = base / "edition"  # the student's folder in Chameleon's Jupyter
    assert class_edition.build(edition) == []
    solved = editions.solved_notebook(NOTEBOOK, base / "solved")
    code, prepared, log = venvs.run(
        review_venv, NOTEBOOK, base, {"LAB_PASS": "prepare"}, notebook=solved, root=edition
    )
    assert code == 0 and not venvs.errors(prepared), log[-4000:]
    kept, _ = ClearHiddenTests(enforce_metadata=False).preprocess(prepared, {})
    nbformat.write(kept, edition / "notebooks" / f"{NOTEBOOK}.ipynb")
    out = base / "out"
    out.mkdir()
    env = {
        "JOURNEY_PREPARED": str(edition),
        "JOURNEY_MEASURE": json.dumps([sys.executable, str(TESTS / "journey_node.py")]),
        "JOURNEY_PYTHON": str(review_venv),
        "JOURNEY_OUT": str(out),
    }
    result = scenario("journey", tmp_path_factory, env=env, timeout=2400)
    bundle = edition / "results" / "bundles" / NOTEBOOK
    return {
        "result": result,
        "out": out,
        "prepared": json.loads((bundle / "prepared.json").read_text()),
        "measured": nbformat.read(out / "measured.ipynb", as_version=4),
        "reviewed": nbformat.read(out / f"{NOTEBOOK}_solved_review.ipynb", as_version=4),
        "landed": out / "jupyter_results" / "bundles" / NOTEBOOK,
    }


def test_prepare_keeps_every_edit_and_notebook_2_carries_them(journey):
    prepared = journey["prepared"]
    assert set(prepared["edits"]) == {"6.3a", "6.3f", "6.4b", "6.6a", "6.6e"}
    source = editions.source_of(NOTEBOOK).read_text()
    assert len(prepared["predictions"]) == source.count("claims.predict(")
    result = journey["result"]
    assert result["node"]["prepared"][NOTEBOOK] == prepared  # in the node's bundles folder
    provision = text(run(result, "02_provision", "provision"))
    assert f"{NOTEBOOK}.ipynb: carried to the node" in provision
    assert f"{NOTEBOOK}: what its prepare pass kept (prepared.json) carried" in provision


def test_every_prepared_edit_is_made_on_the_nodes_file_without_asking(journey):
    result, out = journey["result"], journey["out"]
    assert result["notes"]["measure exit"] == 0, (out / "measure.log").read_text()[-4000:]
    measured = journey["measured"]
    assert not venvs.errors(measured)
    printed = "\n".join(venvs.printed(measured))
    assert ASKS not in printed
    for step in EDITS:
        assert f"{step}: your prepare pass's edit" in printed, step
    # on two GPUs the lease loaded 6.3d's "all on GPU 0" between 6.3a and 6.3f: 6.3f's edit was
    # made over it, the node's weights parameter kept
    assert "+instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]" in printed
    node_file = (out / "node" / "model_repository" / "food_classifier" / "config.pbtxt").read_text()
    assert re.search(r"count: 4, kind: KIND_GPU, gpus: \[ 0, 1 \]", node_file), node_file
    assert 'parameters { key: "weights"' in node_file
    made = json.loads((journey["landed"] / "made_edits.json").read_text())
    assert sorted(made) == list(EDITS)


def test_the_bundle_cut_short_comes_back_where_the_review_reads_it(journey):
    result = journey["result"]
    deleted = text(run(result, "02_provision", "delete server"))
    assert re.search(rf"brought back \d+ file\(s\) of \d+ bundle\(s\) \(.*{NOTEBOOK}", deleted)
    assert re.search(r" to /\S+/work/results/bundles$", deleted, re.M), deleted
    manifest = json.loads((journey["landed"] / "manifest.json").read_text())
    assert manifest["notebook"] == NOTEBOOK and not manifest["finished"]  # the lease ended


def test_the_review_gives_every_measured_verdict_and_names_the_rest(journey):
    result, out = journey["result"], journey["out"]
    assert result["notes"]["review exit"] == 0, (out / "review.log").read_text()[-4000:]
    reviewed = journey["reviewed"]
    assert not venvs.errors(reviewed)
    printed = venvs.printed(reviewed)
    assert any("this bundle's measure pass stopped before the notebook's end" in p for p in printed)
    claims = pd.read_csv(out / "jupyter_results" / "triton" / "claims.csv", keep_default_na=False)
    on_the_node = set(claims[claims["note"].str.endswith("judged in the measure pass")]["claim"])
    expected = [
        line
        for line in venvs.decided(journey["measured"])
        if not any(claim in line for claim in on_the_node)
    ]
    assert expected and venvs.decided(reviewed) == expected
    [named] = [p for p in printed if "not measured, so not reviewed here:" in p]
    steps = re.search(r"not reviewed here: (.*?)\. Their", named).group(1).split(", ")
    assert {"6.4", "6.6"} <= set(steps) and not {"6.1", "6.2"} & set(steps), named
    assert sum(p.startswith("(not measured") for p in printed) >= len(steps) / 2
