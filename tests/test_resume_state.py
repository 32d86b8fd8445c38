"""maintainers/reference/resume_state.py: a notebook stopped between two cells is taken up again in
another process with everything its namespace held, the lab's own objects included.

Every class servelab defines is named below, once: an example of it that must come back from a
saved state in a new process equal to what was saved (EXAMPLES), or why a namespace that holds
one makes it again instead (REMADE: it holds a thread, a process, a session), or why no notebook's
namespace holds one (NOT_HELD: it lives inside a server, or it is the lab's own table). A new
class fails test_every_servelab_class_is_named until it is named here. A perf_analyzer line (a str
subclass whose __new__ needs its words and flags) once pickled and did not load: notebook 7 on an
H200 could not be taken up after its first device call.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import pickle
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import servelab
from maintainers.reference import resume_state

REPO = Path(__file__).resolve().parent.parent
LINE = (
    "perf_analyzer -m food_classifier_tuned -u 127.0.0.1:8001 -i grpc --shared-memory system "
    "--concurrency-range 1024 --async --shape input:224,224,3"
)
OUTPUT = """Request concurrency: 4
  Pass [1] throughput: 100.5 infer/sec. Avg latency: 39000 usec (std 100 usec).
  Pass [2] throughput: 101.0 infer/sec. Avg latency: 39100 usec (std 100 usec).
  Pass [3] throughput: 99.5 infer/sec. Avg latency: 39200 usec (std 100 usec).
"""


def _line():
    from servelab import perf

    return perf.Line.read(LINE)


def _run():
    from servelab.perf.result import Run

    table = pd.DataFrame([{"concurrency": 4, "throughput_infer_s": 100.3, "p95_ms": 41.0}])
    run = Run("7.7 compiled", _line(), ["perf_analyzer", "-m", "m"], OUTPUT, 12.5, table)
    run.extra.update(mode="windows", avg_batch_size=3.5)
    run.stats = {"requests": 300, "batch_sizes": {1: 10, 4: 70}}
    run.utilisation = [{"t_s": 0.5, "gpu0_util_pct": 80.0}]
    run.served_config = {"max_batch_size": 64}
    return run


def _command():
    from servelab.perf import command

    return command.command(_line(), Path("/tmp/perf_x.csv"))


def _way():
    from servelab import three_way
    from servelab.paths import test_photo

    return three_way.ways(test_photo(), {"ray": "http://127.0.0.1:1/food"})["ray"]


def _sampled(sampler):
    """A sampler after a run: its samples, its stopped thread's event."""
    rows = [{"t_s": 0.5, "RUNNING": 2}, {"t_s": 1.0, "RUNNING": 3}]
    if hasattr(sampler, "readings"):
        sampler.readings = rows
    else:
        sampler.samples = rows
    return sampler


def _exception(module: str, name: str):
    return lambda: getattr(importlib.import_module(module), name)("what went wrong")


# class -> a factory of an example that must come back equal
EXAMPLES = {
    "servelab.claims.ClaimFailed": _exception("servelab.claims", "ClaimFailed"),
    "servelab.claims.Prediction": lambda: _module("servelab.claims").Prediction(
        "6.1 queue at c16 (ms)", 40.0, "it grows with load", "2026-11-28T10:00:00+0000", "38.1 ms"
    ),
    "servelab.triton.config_change.CannotMake": _exception(
        "servelab.triton.config_change", "CannotMake"
    ),
    "servelab.triton.config_change.Change": lambda: _module("servelab.triton.config_change").Change(
        (("instance_group",),), "instance_group [ { count: 1 } ]", "instance_group [ { count: 2 } ]"
    ),
    "servelab.claims.Measured": lambda: _module("servelab.claims").Measured.from_samples(
        [3.0, 4.0, 5.0]
    ),
    "servelab.decode_budget.Facts": lambda: _module("servelab.decode_budget").Facts(1, 2, 3, 0, 0),
    "servelab.decode_budget.OverBudget": _exception("servelab.decode_budget", "OverBudget"),
    "servelab.exercises.answers.NotYet": _exception("servelab.exercises.answers", "NotYet"),
    "servelab.exercises.step_needs.AnyOrder": lambda: _module(
        "servelab.exercises.step_needs"
    ).AnyOrder([4, 6, 8]),
    "servelab.exercises.step_needs.Instances": lambda: _module(
        "servelab.exercises.step_needs"
    ).Instances({"GPU 0": 2, "GPU 1": 2}, 2),
    "servelab.exercises.step_needs.Wrong": _exception("servelab.exercises.step_needs", "Wrong"),
    "servelab.image_decode.BadInput": _exception("servelab.image_decode", "BadInput"),
    "servelab.loadgen.spread.Senders": lambda: _module("servelab.loadgen.spread").Senders(1),
    "servelab.model_analyzer.Report": lambda: _module("servelab.model_analyzer").Report(
        Path("/tmp/ma"), pd.DataFrame({"instances": [1, 2]}), {"budget": 3}
    ),
    "servelab.passes.bundle.Bundle": lambda: _module("servelab.passes.bundle").Bundle(
        Path("/tmp/bundle"), {"notebook": "07", "entries": {}}
    ),
    "servelab.passes.choice.Stop": _exception("servelab.passes.choice", "Stop"),
    "servelab.passes.offline.OfflineCall": lambda: _module("servelab.passes.offline").OfflineCall(
        "client.load_model('food_classifier')"
    ),
    "servelab.perf.command.Command": _command,
    "servelab.perf.flags.Flags": lambda: _line().read_flags,
    "servelab.perf.line.Line": _line,
    "servelab.perf.result.Run": _run,
    "servelab.perf.run.PerfAnalyzerError": _exception("servelab.perf.run", "PerfAnalyzerError"),
    "servelab.queueing.ServiceTime": lambda: _module("servelab.queueing").ServiceTime(1.5, 0.2),
    "servelab.serve_options.NotOptions": _exception("servelab.serve_options", "NotOptions"),
    "servelab.three_way.Setting": lambda: _module("servelab.three_way").SETTINGS["gpu"],
    "servelab.three_way.Way": _way,
    "servelab.triton.gpu_names.Gpu": lambda: _module("servelab.triton.gpu_names").Gpu(
        0, "GPU-1", "NVIDIA H200", "00:06.0", 1.0, 143771.0, 9.5
    ),
    "servelab.triton.gpu_names.Names": lambda: _module("servelab.triton.gpu_names").Names(
        {"GPU-1": 0}, "nvidia-smi", {"GPU-1": "00:06.0"}
    ),
    "servelab.triton.live_metrics.Watch": lambda: _module("servelab.triton.live_metrics").Watch(
        "http://127.0.0.1:8002/metrics", ["food_classifier"], 0.5
    ),
    # samplers: their samples come back, a new thread takes their sampling up
    "servelab.triton.triton_stats.Sampler": lambda: _sampled(
        _module("servelab.triton.triton_stats").Sampler("http://127.0.0.1:8002/metrics")
    ),
    "servelab.ray_serving.Replicas": lambda: _sampled(_module("servelab.ray_serving").Replicas()),
    "servelab.triton.triton_config.ReloadResult": lambda: _module(
        "servelab.triton.triton_config"
    ).ReloadResult("food_classifier", True, 3.2, "-a\n+b", "", True, {"max_batch_size": 16}),
}

# a notebook holding one of these makes it again on resume, by the statement that bound it
REMADE = {
    "servelab.serving.runtimes.OnnxClassifier": "an ONNX Runtime session",
    "servelab.serving.runtimes.TorchClassifier": "a PyTorch model on its device",
    "servelab.serving.shape_buckets.BucketedSessions": "ONNX Runtime sessions",
    "servelab.serving.tuned_runtime.TunedClassifier": "a compiled model and its CUDA graphs",
}

# no notebook's namespace holds one
NOT_HELD = {
    "servelab.decode_budget.CpuBudget": "one decode's CPU clock, inside a request",
    "servelab.exercises.judges._Latencies": "cheapest()'s sentences, inside one call",
    "servelab.passes.node_calls._Tee": "a cell's output while it runs",
    "servelab.passes.cut_short.Guard": "IPython's cell transformer, in the review pass's shell",
    "servelab.passes.cut_short.NotMeasured": "raised and caught inside one review cell",
    "servelab.triton.prepared_edit._ByHand": "one prepared edit's outcome, inside one call",
    **{
        f"servelab.exercises.{n}": "the exercises' table (servelab.exercises.steps)"
        for n in ("key.Needs", "key.Plain", "key.Sealed", "step_needs.Every", "step_needs.OnFirst")
    },
    **{
        f"servelab.decode_pool.{n}": "a service's decode workers, inside its process"
        for n in ("Busy", "OverCpu", "Pool", "Refused", "WorkerEnded", "_Worker")
    },
    **{
        f"servelab.exercises.steps.{n}": "the exercises' table (servelab.exercises.steps)"
        for n in ("Curl", "Decision", "Edit", "Fragment", "Function", "Perf", "Result")
    },
    **{
        f"servelab.serving.{name}": "inside a service or a Triton model's process"
        for name in (
            "body_limit.BodySizeLimit",
            "gpu_report.Report",
            "inference_api.ModelHolder",
            "inference_api.PredictRequest",
            "inference_api.Prediction",
            "log_limit.RateLimit",
            "pinned_shm.DirectCopier",
            "pinned_shm.ShmRegions",
            "stub_profile.StubClock",
            "triton_watchdog.Watchdog",
        )
    },
}


def _module(name: str):
    return importlib.import_module(name)


def servelab_classes() -> dict[str, type]:
    """Every class defined in a servelab module, by its dotted name."""
    found = {}
    for info in pkgutil.walk_packages(servelab.__path__, "servelab."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


def same(a, b) -> bool:
    """Equal as a notebook would use them: the same type, fields, text, tables."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseException):
        return a.args == b.args
    if isinstance(a, pd.DataFrame):
        return a.equals(b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, str) and hasattr(a, "words"):  # a perf line: the text and what it reads
        return str(a) == str(b) and a.words == b.words and a.read_flags == b.read_flags
    if dataclasses.is_dataclass(a):
        return all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        ) and same(_data(a), _data(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return same(_data(a), _data(b))
    return a == b


def _data(value) -> dict:
    """What an object holds, without what a process has (events, threads, sessions, pools)."""
    return {k: v for k, v in vars(value).items() if not k.startswith("_")}


def test_every_servelab_class_is_named():
    named = [*EXAMPLES, *REMADE, *NOT_HELD]
    assert len(named) == len(set(named)), "a class is named twice"
    found = set(servelab_classes())
    assert found - set(named) == set(), "a servelab class no list here names: add it"
    assert set(named) - found == set(), "a class named here is gone from servelab"


# module-level containers of servelab that are tables, not a notebook's state
TABLES = {
    "servelab.claims.CLAIM_FIELDS",
    "servelab.decode_budget._PNG_METADATA",
    "servelab.decode_budget._SOF",
    "servelab.decode_budget._STANDALONE",
    "servelab.ensemble.PATHS",
    "servelab.exercises.command_lines._CURL_LONG_VALUES",
    "servelab.exercises.command_lines._CURL_SHORT_VALUES",
    "servelab.exercises.steps.STEPS",
    "servelab.exercises.answer_key.NEEDS",
    "servelab.exercises.answer_key._61",
    "servelab.exercises.answer_key._64",
    "servelab.exercises.answer_key._73",
    "servelab.exercises.answer_key._GRPC",
    "servelab.exercises.answer_key._RATE",
    "servelab.exercises.command_lines.ASKS",
    "servelab.exercises.command_lines.DEFAULTS",
    "servelab.exercises.command_lines.MISSING",
    "servelab.exercises.command_lines.SAID",
    "servelab.exercises.steps.CANON",
    "servelab.hardware.SHOWN",
    "servelab.image_decode._TURNS",
    "servelab.labenv.CLASS_URLS",
    "servelab.labenv.TRITON_DEFAULTS",
    "servelab.model_analyzer.COLUMNS",
    "servelab.model_analyzer.SHOWN",
    "servelab.passes.cells._WHY",
    "servelab.passes.choice.WHAT",
    "servelab.perf.flags.ANY_CASE",
    "servelab.perf.flags.CHANGES",
    "servelab.perf.flags.DEFAULTS",
    "servelab.perf.flags.LENGTH_ONLY",
    "servelab.perf.flags.RANGES",
    "servelab.perf.flags._LONG",
    "servelab.perf.flags._LONG_SWITCHES",
    "servelab.perf.flags._NOT_ITS_NAME",
    "servelab.perf.flags._SHORT",
    "servelab.perf.flags._SHORT_IS_LONG",
    "servelab.perf.output.CSV_COLUMNS",
    "servelab.perf.output._NOT_US",
    "servelab.perf.step_table.COLUMNS",
    "servelab.ray_serving.LOOK",
    "servelab.serve_options.CHANGES",
    "servelab.serving.inference_api.UVICORN_ARGS",
    "servelab.serving.ray_app.ROUTER",
    "servelab.serving.runtimes.FASTAPI_BACKENDS",
    "servelab.serving.runtimes.RUNTIMES",
    "servelab.serving.tuned_runtime.INPUT_FORMATS",
    "servelab.three_way.BATCHED",
    "servelab.three_way.BATCHING",
    "servelab.three_way.CPU_FORM",
    "servelab.three_way.NAMES",
    "servelab.three_way.SETTINGS",
    "servelab.triton.model_repository.MODELS",
    "servelab.triton.model_repository.ON_DEMAND_MODELS",
    "servelab.triton.model_repository.PLACED_NAMES",
    "servelab.triton.triton_stats.COUNTERS",
    "servelab.triton.triton_stats.GAUGES",
}
# caches a new process fills again by itself
CACHES = {"servelab.triton.gpu_names._FROM_TRITON", "servelab.triton.gpu_names._SMI_CACHE"}


def module_containers() -> set[str]:
    """Every dict, list and set a servelab module binds at its top level (its __all__ aside)."""
    import ast

    found = set()
    for info in pkgutil.walk_packages(servelab.__path__, "servelab."):
        module = importlib.import_module(info.name)
        for node in ast.parse(inspect.getsource(module)).body:
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            for name in (t.id for t in targets if isinstance(t, ast.Name)):
                value = getattr(module, name, None)
                if isinstance(value, (dict, list, set)) and name != "__all__":
                    found.add(f"{info.name}.{name}")
    return found


def test_every_module_level_container_is_state_or_a_table():
    """What a servelab module keeps for a notebook (resume_state.LAB_STATE) comes back with a
    stopped run; every other dict, list or set at a module's top level is named here as a table
    or a cache. A new one fails until it is named."""
    state = {f"{m}.{n}" for m, names in resume_state.LAB_STATE.items() for n in names}
    assert not state & (TABLES | CACHES)
    assert module_containers() == state | TABLES | CACHES


@pytest.mark.slow
def test_every_example_comes_back_in_a_new_process(tmp_path):
    """The examples saved as a notebook's namespace, loaded by another interpreter, pickled
    back: each equal to what was saved, none made again."""
    examples = {name.replace(".", "_"): make() for name, make in EXAMPLES.items()}
    cells = ["x = 1"]
    state, back = tmp_path / "nb.state", tmp_path / "back.pickle"
    kept = resume_state.save(state, cells, 2, dict(examples), [])
    assert kept["remade"] == [] and sorted(kept["pickled"]) == sorted(examples)
    child = (
        "import pickle, sys\n"
        "from pathlib import Path\n"
        "from maintainers.reference import resume_state\n"
        "ns = {}\n"
        f"resume_state.load(Path({str(state)!r}), ['x = 1'], ns)\n"
        f"Path({str(back)!r}).write_bytes(pickle.dumps({{k: v for k, v in ns.items() "
        "if not k.startswith('__')}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = pickle.loads(back.read_bytes())
    for name, value in examples.items():
        assert same(value, loaded[name]), name


def test_a_value_whose_pickle_does_not_load_is_made_again(tmp_path):
    """What broke the H200 run: a value that pickles but does not load counts as not pickling,
    so its statement runs again on resume instead of the load failing."""

    cells = ["x = _Broken('a', 'b')", "print(x)"]
    namespace = {"x": _Broken("a", "b"), "y": [1, 2]}
    kept = resume_state.save(tmp_path / "s", cells, 2, namespace, [])
    assert kept == {"pickled": ["y"], "remade": ["x"], "modules": []}


class _Broken(str):
    def __new__(cls, text, extra):
        return super().__new__(cls, text)


def test_two_names_of_one_object_stay_one_object(tmp_path):
    run = _run()
    namespace = {"runs": {"best": run}, "best_run": run}
    state = tmp_path / "s"
    resume_state.save(state, ["pass"], 2, namespace, [])
    again: dict = {}
    resume_state.load(state, ["pass"], again, say=lambda _: None)
    assert again["runs"]["best"] is again["best_run"]


NOTEBOOK = """# %%
import json
import os
import threading
import warnings
from pathlib import Path
from servelab import claims, exercises, perf, three_way
from servelab.loadgen import spread
from servelab.perf.result import Run
import pandas as pd
import pytest
OUT = Path({out!r})
ran = Path({ran!r})
line = perf.Line.read({line!r})
c16 = line.with_load("--concurrency-range 16")
table = pd.DataFrame([{{"concurrency": 16, "throughput_infer_s": 250.0}}])
runs = {{"7.6 c16": Run("7.6 c16", c16, list(c16.words), "", 3.0, table)}}
best = runs["7.6 c16"]
setting = three_way.SETTINGS["gpu"]
senders = spread.Senders(1)
claims.predict("7.2 served / limit at the start", 0.3, why="a guess")
exercises.given(N_GPUS=1, SWEEP="4,8")
os.environ["LAB_SET_BY_A_CELL"] = "yes"
os.environ.pop("LAB_REMOVED_BY_A_CELL", None)
with warnings.catch_warnings():  # an import inside a block (notebook 7's shared-memory module)
    import statistics as stats
twice = lambda x: 2 * x  # noqa: E731 - a lambda: no def makes it again
ran.write_text("a")
lock = (ran.write_text(ran.read_text() + "L"), threading.Lock())[1]  # no later cell uses it
# %%
served = claims.Measured.from_samples([240.0, 250.0, 260.0])
claims.at_least("served at least 200/s", served, 200)
ran.write_text(ran.read_text() + "b")
# %%
ran.write_text(ran.read_text() + "c")
from servelab.exercises import steps
OUT.write_text(json.dumps({{
    "line": line, "flags": line.value("--concurrency-range"),
    "c16": c16.value("--concurrency-range"),
    "same_run": runs["7.6 c16"] is best, "row": best.row["throughput_infer_s"],
    "objective": setting.objective_ms, "served": served.value, "senders": senders.processes,
    "predicted": claims.PREDICTIONS[-1].value,
    "claims": [r["claim"] for r in claims.RESULTS], "given": steps.value("SWEEP"),
    "set": os.environ.get("LAB_SET_BY_A_CELL"), "removed": os.environ.get("LAB_REMOVED_BY_A_CELL"),
    "median": stats.median([1, 2, 3]), "twice": twice(2),
}}))
"""


@pytest.mark.slow
def test_a_notebook_stopped_between_cells_is_taken_up_by_a_new_process(tmp_path):
    """script_runner as run_reference.py runs it (LAB_RESUMABLE_S): a process per call, each
    stopping after one cell; the third finishes with every value the first two made."""
    from maintainers.reference import script_runner

    out, ran = tmp_path / "out.json", tmp_path / "ran.txt"
    source, state = tmp_path / "nb.py", tmp_path / "nb.state"
    source.write_text(NOTEBOOK.format(out=str(out), ran=str(ran), line=LINE))
    command = [
        sys.executable,
        "-m",
        "maintainers.reference.script_runner",
        str(source),
        "--stop-after",
        "0",
        "--state",
        str(state),
    ]
    codes = []
    env = {**os.environ, "LAB_REMOVED_BY_A_CELL": "there"}
    for _ in range(3):
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=180
        )
        codes.append(done.returncode)
        assert done.returncode in (0, script_runner.STOPPED), done.stdout + done.stderr[-2000:]
    assert codes == [script_runner.STOPPED, script_runner.STOPPED, 0]
    assert ran.read_text() == "aLbc"  # each cell once, the lock no later cell uses not again
    got = json.loads(out.read_text())
    assert got == {
        "line": LINE,
        "flags": "1024",
        "c16": "16",
        "same_run": True,
        "row": 250.0,
        "objective": 50.0,
        "served": 250.0,
        "senders": 1,
        # the lab's own state, kept by its modules, and the environment the cells changed
        "predicted": 0.3,
        "claims": ["served at least 200/s"],
        "given": "4,8",
        "set": "yes",
        "removed": None,
        "median": 2,
        "twice": 4,
    }
    assert not state.exists()
