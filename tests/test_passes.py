"""One notebook, three passes (issue 41): which cells each pass runs, what the measure pass keeps in
a notebook's bundle and the review pass reads back (the same numbers), what the prepare pass
requires, and the one sentence that refuses a wrong pass or bundle, changing nothing."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from servelab import claims, exercises, labenv, passes, perf
from servelab.exercises import steps
from servelab.loadgen import saved as http_saved
from servelab.passes import bundle as bundles
from servelab.passes import cells, node_calls, record
from servelab.paths import REPO_ROOT, STAGING
from servelab.perf import flags
from servelab.perf import output as perf_output
from servelab.perf import saved as perf_saved
from servelab.triton import config_text, instances, triton_config

NOTEBOOK = "06_triton_benchmarks"
PERF_CSV = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
    "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,"
    "p90 latency,p95 latency,p99 latency,Avg latency\n"
    "8,95.123456789,20,300,72970,100,10200,50,10,84300,120000,140000,165300,84012\n"
)
PERF_OUTPUT = (
    "Request concurrency: 8\n"
    "  Pass [1] throughput: 93.5 infer/sec. Avg latency: 85100 usec (std 100 usec)\n"
    "  Pass [2] throughput: 95.75 infer/sec. Avg latency: 83900 usec (std 100 usec)\n"
    "  Pass [3] throughput: 96.0 infer/sec. Avg latency: 83500 usec (std 100 usec)\n"
)


def sentence(call) -> str:
    """The one sentence a Stop says: no traceback, no second line."""
    with pytest.raises(passes.Stop) as caught:
        call()
    text = str(caught.value)
    assert caught.value._render_traceback_() == [text]
    assert "\n" not in text and text.endswith("."), text
    return text


@pytest.fixture
def in_pass(monkeypatch, tmp_path):
    """start(lab_pass): the notebook started in that pass, its bundles under tmp_path; the pass
    is forgotten afterwards."""
    monkeypatch.setenv("LAB_BUNDLE", str(tmp_path / "bundles"))
    claims.RESULTS.clear()
    claims.PREDICTIONS.clear()

    def start(lab_pass: str, notebook: str = NOTEBOOK) -> bundles.Bundle:
        """A new kernel: nothing judged or predicted yet."""
        monkeypatch.setenv("LAB_PASS", lab_pass)
        claims.RESULTS.clear()
        claims.PREDICTIONS.clear()
        passes.start(notebook)
        return node_calls.STATE["bundle"]

    yield start
    node_calls.STATE.update({"pass": None, "notebook": None, "bundle": None, "inside": 0})
    claims.RESULTS.clear()
    claims.PREDICTIONS.clear()


def a_run(
    name: str = "6.1 c8", line: str = "perf_analyzer -m food_classifier --concurrency-range 8"
):
    run = perf.Run(name, perf.Line.read(line), ["perf_analyzer"], PERF_OUTPUT, 12.5)
    run.table = perf_output.parse_csv(PERF_CSV)
    run.extra = {
        "delayed_pct": 0.0,
        "batch_executions": {1: 700, 2: 3},
        "busy_U": 0.994,
        "command": line,
        "run": name,
    }
    run.stats = {"batch_executions": {1: 700, 2: 3}, "execution_ms_avg": 10.2}
    run.utilisation = [{"t_s": 0.5, "cpu_util_pct": 61.25}, {"t_s": 1.0, "cpu_util_pct": 70.5}]
    run.served_config = {"name": "food_classifier", "instance_group": [{"count": 1}]}
    return run


# ---------------------------------------------------------------- which cells a pass runs


@pytest.mark.parametrize(
    "lab_pass, runs",
    [("prepare", False), ("measure", True), ("review", True)],
)
def test_a_marked_cell_runs_in_its_passes_and_says_so_elsewhere(monkeypatch, lab_pass, runs):
    monkeypatch.setenv("LAB_PASS", lab_pass)
    cell = ["%%runs_in measure review\n", "x = 1\n"]
    assert cells.transform(["x = 1\n"]) == ["x = 1\n"]  # no line: every pass
    if runs:
        assert cells.transform(cell) == ["\n", "x = 1\n"]  # line numbers kept
    else:
        [said] = cells.transform(cell)
        assert said.startswith("print(") and "measure and review passes" in said
    only_measure = cells.transform(["%%runs_in measure\n", "y = 2\n"])
    assert (only_measure == ["\n", "y = 2\n"]) == (lab_pass == "measure")


def test_a_wrong_pass_name_is_one_sentence(monkeypatch):
    assert "prepare, measure, review" in sentence(lambda: cells.passes_of("%%runs_in measur"))
    monkeypatch.setenv("LAB_PASS", "lease")
    assert "LAB_PASS is 'lease'" in sentence(passes.current)


# ---------------------------------------------------------------- the bundle, kept and read


def test_measure_keeps_what_review_gives_back(in_pass, capsys):
    bundle = in_pass("measure")
    run = passes.on_node(
        "perf 6.1 c8", "perf", lambda: print("ran") or a_run(), perf_saved.write, perf_saved.read
    )
    gpus = passes.on_node("GPUs", "value", lambda: 2)
    passes.change("edit food_classifier", lambda: print("reloaded in 1.0 s"))
    manifest = json.loads((bundle.folder / "manifest.json").read_text())
    assert list(manifest["entries"]) == ["perf 6.1 c8", "GPUs", "edit food_classifier"]
    assert manifest["notebook"] == NOTEBOOK and manifest["class_version"] == bundles.CLASS_VERSION
    passes.finish()  # the last cell: whole, and packed for download
    assert (bundle.folder.parent / f"{NOTEBOOK}.zip").stat().st_size > 0
    capsys.readouterr()
    in_pass("review")
    back = passes.on_node("perf 6.1 c8", "perf", pytest.fail, perf_saved.write, perf_saved.read)
    assert passes.on_node("GPUs", "value", pytest.fail) == gpus == 2
    assert passes.change("edit food_classifier", pytest.fail) is None
    printed = capsys.readouterr().out
    assert "ran" in printed and "reloaded in 1.0 s" in printed  # as the measure pass printed
    assert back.row == run.row and back.windows == run.windows
    assert back.throughput == run.throughput and back.utilisation == run.utilisation
    assert back.stats["batch_executions"] == {1: 700, 2: 3}  # batch sizes as numbers again
    said = sentence(lambda: passes.on_node("perf 6.9", "perf", pytest.fail))
    assert "has no 'perf 6.9'" in said


def test_a_run_read_back_reads_its_line_once(in_pass, monkeypatch, tmp_path):
    reads = []
    parse = flags.parse
    monkeypatch.setattr(flags, "parse", lambda words: reads.append(words) or parse(words))
    perf_saved.write(a_run(), tmp_path)
    reads.clear()
    run = perf_saved.read(tmp_path)
    assert len(reads) == 1 and run.line.value("--concurrency-range") == "8"
    assert perf_saved.same_run(run, run.line) is run
    other = perf.Line.read("perf_analyzer -m food_classifier --concurrency-range 16")
    assert "this notebook now asks" in sentence(lambda: perf_saved.same_run(run, other))


def test_an_http_run_reads_back_with_its_statuses_as_numbers(tmp_path):
    df = pd.DataFrame(
        {
            "t_start": [0.0, 0.1234567891234, 0.3],
            "latency_ms": [10.5, 11.25, float("nan")],
            "status": [200, 200, "error: ConnectionError"],
        }
    )
    df.attrs.update(label="onnx_sequential", concurrency=1, wall_s=0.4)
    http_saved.write(df, tmp_path)
    back = http_saved.read(tmp_path)
    assert list(back["status"]) == [200, 200, "error: ConnectionError"]
    assert back["t_start"].tolist() == df["t_start"].tolist() and back.attrs == df.attrs


def test_prepare_reaches_no_node_and_nothing_runs_without_a_pass(in_pass):
    assert passes.on_node("GPUs", "value", lambda: 3) == 3  # no pass started: it just runs
    in_pass("prepare")
    assert "the prepare pass does not reach" in sentence(
        lambda: passes.on_node("GPUs", "value", pytest.fail)
    )


# ---------------------------------------------------------------- the review refuses, in a sentence


def refused(in_pass, tmp_path) -> str:
    before = sorted(p.name for p in tmp_path.rglob("*"))
    said = sentence(lambda: in_pass("review"))
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing changed
    return said


def test_review_refuses_only_another_notebooks_or_versions_bundle(in_pass, tmp_path):
    """A bundle cut short, or missing some files, is reviewed for what it holds
    (tests/test_passes_cut_short.py); only none at all, another notebook's or another class
    version's is refused."""
    assert "there is no bundle" in refused(in_pass, tmp_path)
    bundle = in_pass("measure")
    passes.on_node("GPUs", "value", lambda: 2)
    in_pass("review")  # cut short: reviewed
    in_pass("measure")
    passes.finish()
    manifest = json.loads((bundle.folder / "manifest.json").read_text())
    for change, says in (
        ({"class_version": "1999.1"}, "comes from class version 1999.1"),
        ({"notebook": "04_fastapi_benchmarks"}, "is 04_fastapi_benchmarks's, not 06_"),
    ):
        bundles.write_json(bundle.folder / "manifest.json", {**manifest, **change})
        assert says in refused(in_pass, tmp_path)


def test_a_downloaded_zip_in_the_bundles_folder_is_reviewed(in_pass, capsys):
    bundle = in_pass("measure")
    passes.on_node("GPUs", "value", lambda: 2)
    passes.finish()
    for f in sorted(bundle.folder.rglob("*"), reverse=True):
        f.rmdir() if f.is_dir() else f.unlink()
    bundle.folder.rmdir()  # only the .zip, downloaded, is left where the review looks
    capsys.readouterr()
    in_pass("review")
    assert f"{NOTEBOOK}.zip unpacked into {bundle.folder}" in capsys.readouterr().out
    assert passes.on_node("GPUs", "value", pytest.fail) == 2


def test_a_measure_pass_adds_to_no_other_bundle(in_pass, monkeypatch):
    bundle = in_pass("measure")
    bundles.write_json(bundle.folder / "manifest.json", {**bundle.manifest, "class_version": "0"})
    assert "move it away first" in sentence(lambda: in_pass("measure"))
    monkeypatch.setenv("LAB_PASS", "prepare")
    said = sentence(lambda: passes.start("07_how_close_to_the_hardware", passes=("measure",)))
    assert "runs in the measure pass only" in said


# ---------------------------------------------------------------- what you wrote, with its time


def test_an_edit_made_in_prepare_is_made_again_in_the_nodes_file(in_pass, monkeypatch, tmp_path):
    """The lease runs what the student wrote: the config.pbtxt edit checked in the prepare pass
    is made in the node's file by the measure pass and checked again there, also where the
    node's file holds more than the copy edited (tests/test_passes_prepared_edits.py: the node's
    own repository, the chain of edits)."""
    repo = tmp_path / "repo"
    node_file = repo / "food_classifier" / "config.pbtxt"
    node_file.parent.mkdir(parents=True)
    node_file.write_text((STAGING / "food_classifier" / "config.pbtxt").read_text())
    monkeypatch.setenv("TRITON_MODEL_REPOSITORY", str(repo))
    monkeypatch.setitem(steps.GIVEN, "N_GPUS", 2)  # as notebook 6 hands it to the checks
    in_pass("prepare")
    copy, before = triton_config.to_edit("food_classifier", "6.3a")
    assert copy != node_file and before == node_file.read_text()
    edited = config_text.replace_fields(before, instances.instance_group(2, 2))
    copy.write_text(edited)
    assert "count: 2" in exercises.file_edit(copy, before, "6.3a")
    assert node_file.read_text() == before  # prepare reaches no node

    own = before.replace("max_batch_size", "# a node of its own\nmax_batch_size")
    node_file.write_text(own)
    in_pass("measure")
    path, measured_before = triton_config.to_edit("food_classifier", "6.3a")
    assert path == node_file and measured_before == own
    assert path.read_text() == config_text.replace_fields(own, instances.instance_group(2, 2))
    assert "count: 2" in exercises.file_edit(path, measured_before, "6.3a")
    again = triton_config.to_edit("food_classifier", "6.3a")  # the cell run a second time
    assert again == (node_file, own) and "# a node of its own" in node_file.read_text()


def test_predictions_are_required_before_and_kept_after(in_pass, capsys):
    in_pass("prepare")
    assert "write your prediction in place of None" in sentence(
        lambda: claims.predict("6.1 queue at c16 (ms)", None)
    )
    prepared = claims.predict("6.1 queue at c16 (ms)", 400, "one at a time").made
    in_pass("measure")
    guess = claims.predict("6.1 queue at c16 (ms)", 400, "one at a time")  # unchanged since
    assert guess.made == prepared and guess.value == 400
    claims.compare_prediction(guess, 380.0)  # the object the notebook holds, not its name
    with pytest.raises(TypeError, match="the prediction predict\\(\\) returned"):
        claims.compare_prediction("6.1 queue at c16 (ms)", 380.0)
    claims.at_least("a claim", 2.0, 1.0)
    out = node_calls.STATE["bundle"].folder.parent / "out"
    claims.save(out)
    saved = pd.read_csv(out / "predictions.csv")
    assert saved[["prediction", "value", "measured"]].values.tolist() == [
        ["6.1 queue at c16 (ms)", 400, 380]
    ]
    passes.finish()
    in_pass("review")
    # written after measuring: not a prediction, the bundle's is kept
    assert claims.predict("6.1 queue at c16 (ms)", 90).value == 400
    assert "is not a prediction" in capsys.readouterr().out
    record.line("6.1", "x", "perf_analyzer ...")  # review keeps no line: it changes nothing
    assert not (node_calls.STATE["bundle"].folder / record.LINES).exists()


def test_review_hands_in_the_claims_only_the_node_could_judge(in_pass, tmp_path):
    in_pass("measure")
    claims.fact("6.5: Flask shows the same class", True)
    claims.at_least("6.1: a claim from the runs", 2.0, 1.0)
    claims.save(tmp_path / "measured")
    passes.finish()
    in_pass("review")
    claims.at_least("6.1: a claim from the runs", 2.0, 1.0)
    claims.save(tmp_path / "reviewed")
    reviewed = pd.read_csv(tmp_path / "reviewed" / "claims.csv", keep_default_na=False)
    assert list(reviewed["claim"]) == [
        "6.1: a claim from the runs",
        "6.5: Flask shows the same class",
    ]
    assert reviewed["note"].iloc[1] == "judged in the measure pass"


def test_notebook_2_brings_the_bundles_back_where_the_review_pass_reads(monkeypatch, tmp_path):
    """Issue 50: no setting between notebook 2's bring-back (Chameleon's Jupyter, or a laptop)
    and the review pass, run from the same notebooks folder; a setting moves both."""
    import sys

    from servelab.paths import NOTEBOOKS

    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    chi_files = __import__("chi_files")
    for name in ("LAB_BUNDLE", "LAB_RESULTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(bundles, "RESULTS", NOTEBOOKS.parent / "results")  # read at import
    assert chi_files.bundles_here(NOTEBOOKS) == bundles.bundles_root()
    monkeypatch.setenv("LAB_BUNDLE", str(tmp_path / "mine"))
    assert chi_files.bundles_here(NOTEBOOKS) == bundles.bundles_root() == tmp_path / "mine"
    sys.modules.pop("chi_files", None)


# ---------------------------------------------------------------- where the services are


def test_prepare_names_the_services_as_the_class_stacks_do(monkeypatch):
    """Before any service runs, a line names a service where the class's Docker stack puts it."""
    monkeypatch.setenv("LAB_PASS", "prepare")
    monkeypatch.delenv("FASTAPI_SERVER_URL", raising=False)
    assert labenv.url("FASTAPI_SERVER_URL") == "http://fastapi_server:8000"
    compose = {}
    for name in ("fastapi", "triton"):
        stack = yaml.safe_load((REPO_ROOT / "docker" / f"docker-compose-{name}.yaml").read_text())
        compose.update(stack["services"]["jupyter"]["environment"])
    assert {k: compose[k] for k in labenv.CLASS_URLS} == labenv.CLASS_URLS
    monkeypatch.setenv("LAB_PASS", "measure")
    with pytest.raises(RuntimeError, match="FASTAPI_SERVER_URL is not set"):
        labenv.url("FASTAPI_SERVER_URL")


def test_review_names_them_and_its_settings_as_the_measure_pass_did(in_pass, monkeypatch):
    monkeypatch.setenv("FASTAPI_SERVER_URL", "http://127.0.0.1:41234")
    monkeypatch.setenv("LAB_N_SEQUENTIAL", "20")
    in_pass("measure")
    labenv.load()
    assert labenv.param("N_SEQUENTIAL", 100) == 20
    passes.finish()
    monkeypatch.setenv("FASTAPI_SERVER_URL", "http://elsewhere:8000")
    monkeypatch.delenv("LAB_N_SEQUENTIAL")
    in_pass("review")
    labenv.load()
    assert labenv.url("FASTAPI_SERVER_URL") == "http://127.0.0.1:41234"
    assert labenv.param("N_SEQUENTIAL", 100) == 20


def test_a_tool_on_the_node_writes_your_calls_down_elsewhere(monkeypatch):
    monkeypatch.setenv("LAB_PASS", "prepare")
    httpclient = passes.node_import("tritonclient.http", "httpclient")
    call = httpclient.InferenceServerClient("h:8000").get_model_config("food_classifier")
    assert re.fullmatch(
        r"httpclient\.InferenceServerClient\('h:8000'\)\.get_model_config\('food_classifier'\)",
        str(call),
    )


def test_the_kept_config_schema_is_tritonclients():
    """Without tritonclient (prepare, review) a config.pbtxt is judged by the schema the lab keeps:
    byte for byte the installed tritonclient's (`python -m servelab.triton.schema` writes it
    again), reading every staged config as tritonclient does."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    from servelab.paths import STAGING
    from servelab.triton import schema

    assert schema.KEPT.read_bytes() == schema.installed()
    kept = schema._kept_class()
    for path in sorted(STAGING.glob("*/config.pbtxt")):
        text = path.read_text()
        ours = text_format.Parse(text, kept())
        theirs = text_format.Parse(text, model_config_pb2.ModelConfig())
        assert text_format.MessageToString(ours) == text_format.MessageToString(theirs), path
    with pytest.raises(text_format.ParseError, match='no field named "cont"'):
        text_format.Parse("instance_group [ { cont: 2 } ]", kept())


def test_an_entry_with_a_long_key_gets_a_short_folder_and_reads_back(in_pass):
    """A config edit's key holds its whole fragment (notebook 8's ensemble: 400 characters, over
    a file name's 255 bytes): its folder is cut short, the manifest keeps the key whole."""
    key = "edit food_classifier_ensemble " + "input_map { key: IMAGE_BYTES } " * 15
    twin = key + "another"
    bundle = in_pass("measure")
    assert passes.on_node(key, "value", lambda: 1) == 1
    assert passes.on_node(twin, "value", lambda: 2) == 2
    manifest = json.loads((bundle.folder / "manifest.json").read_text())
    folders = [manifest["entries"][k]["folder"] for k in (key, twin)]
    assert all(len(f) <= 100 for f in folders) and folders[0] != folders[1], folders
    passes.finish()
    in_pass("review")
    assert passes.on_node(key, "value", pytest.fail) == 1
    assert passes.on_node(twin, "value", pytest.fail) == 2
