"""The checks of notebooks 4 to 7 as the notebooks call them, without a server: the solved answer
passes, and wrong ones are refused naming what is wrong. The solution cell runs with stand-ins
for the notebook's variables (handed to the checks as the notebook does, exercises.given), then
the statements of the next cell that call its check (exercises.perf_line(line, "6.1b"), ...),
nothing else: what each step needs is servelab/exercises/steps.py's."""

import ast
import time

import pytest
from test_notebooks import exercises_of

from labstack import editions
from servelab import exercises
from servelab.exercises import NotYet, config_edits, step_needs

HOST, RATE = "127.0.0.1:8000", 185


def stand_ins(n_gpus: int) -> dict:
    """The variables the exercises of notebooks 6 and 7 use, as a class node would set them,
    handed to the checks as the notebooks do (exercises.given)."""
    values = {
        "HOST": HOST,
        "GRPC_HOST": "127.0.0.1:8001",
        "TRITON": f"http://{HOST}",
        "PERF_INPUT": "../data/perf_input.json",
        "RATE": RATE,
        "RATES": [RATE, 308, 431],
        "N_GPUS": n_gpus,
        "MODEL": "food_classifier_tuned",
        "CLIENTS": 128,
        "SWEEP": [(4, 64, 500), (8, 64, 500)],  # notebook 7's on a GPU
    }
    exercises.given(**values)
    gpus = "[ " + ", ".join(str(i) for i in range(n_gpus)) + " ]"  # as notebook 6 writes it
    return {"exercises": exercises, "GPUS": gpus, **values}


def the_checks(notebook: str, check: str) -> list[tuple[str, str, str]]:
    """(solution cell, the variable it sets, the next cell's lines that check it) of each exercise
    whose next cell calls exercises.<check>."""
    source = editions.source_of(notebook)
    cells = editions.solved(source).cells
    found = []
    for i, _, following in exercises_of(source):
        if f"exercises.{check}(" not in following:
            continue
        tree = ast.parse(following)
        kept = [
            ast.get_source_segment(following, node)
            for node in tree.body
            if f"exercises.{check}(" in ast.get_source_segment(following, node)
            or any(
                isinstance(t, ast.Name) and t.id.startswith("NEEDS_")
                for t in getattr(node, "targets", [])
            )
        ]
        assigned = ast.parse(cells[i].source).body[-1]
        name = assigned.targets[0].id if isinstance(assigned, ast.Assign) else assigned.name
        found.append((cells[i].source, name, "\n".join(kept)))
    return found


def perf_lines():
    return [
        pytest.param(notebook, k, id=f"{notebook[:2]}-{k}")
        for notebook in ("06_triton_benchmarks", "07_how_close_to_the_hardware")
        for k in range(len(the_checks(notebook, "perf_line")))
    ]


def checked(notebook: str, index, check: str, n_gpus: int = 2):
    """(namespace, the variable, the check's code) of one exercise (its index among the checks of
    its kind, or its step's name), its solution already run."""
    scope = stand_ins(n_gpus)
    for k, (solution, name, check_code) in enumerate(the_checks(notebook, check)):
        if index in (k, f'"{index}"') or f'"{index}"' in check_code:
            exec(solution, scope)
            return scope, name, check_code
    raise IndexError(index)


@pytest.mark.parametrize("notebook, index", perf_lines())
def test_each_solved_perf_line_passes_and_a_flag_beyond_it_is_refused(notebook, index):
    scope, name, check = checked(notebook, index, "perf_line")
    solved = scope[name]
    exec(check, scope)  # the solved line passes
    for allowed in (" -p 1000", " --measurement-interval=1000 -v", " -r 5 -s 50", " -b 1"):
        if " -b " in solved and allowed == " -b 1":
            continue  # a batch step needs its own -b
        scope[name] = solved + allowed
        exec(check, scope)
    for extra, named in (
        (" -b 3", "leave `-b 3` out|makes every request 3 images, not the batch"),
        (" --percentile 95", "`--percentile 95`"),
        (" --max-threads 2", "`--max-threads 2`"),
        (" -f out.csv", "`-f out.csv`"),
    ):
        scope[name] = solved + extra
        with pytest.raises(NotYet, match=named):
            exec(check, scope)


def test_the_testers_lines_of_notebook_6():
    """6.1b with -b 16 (run again in 6.3, three rows measured wrong), 6.2 in perf_analyzer's other
    spellings, 6.6c with -b 8 and with its rate written 185.0."""
    scope, name, check = checked("06_triton_benchmarks", "6.1b", "perf_line")
    scope[name] = scope[name] + " -b 16"
    with pytest.raises(NotYet, match="leave `-b 16` out of your line: it makes every request"):
        exec(check, scope)
    scope, name, check = checked("06_triton_benchmarks", "6.2", "perf_line")
    solved = scope[name]
    assert " -b 16 " in solved
    for batch in ("-b16", "-b 16.0"):
        scope[name] = solved.replace("-b 16", batch)
        exec(check, scope)
    scope[name] = solved.replace("-b 16", "--batch-size 16")  # perf_analyzer 2.51 refuses it
    with pytest.raises(NotYet, match="no `--batch-size`: its flag is `-b`"):
        exec(check, scope)
    scope, name, check = checked("06_triton_benchmarks", "6.6c", "perf_line")
    solved = scope[name]
    assert f"--request-rate-range {RATE} " in solved and "constant" in solved
    for rate in (f"{RATE}.0", f"{RATE}.0:{RATE}.0", f"{RATE}:{RATE}:1"):
        scope[name] = solved.replace(f"range {RATE}", f"range {rate}")
        exec(check, scope)
    scope[name] = solved + " -b 8"
    with pytest.raises(NotYet, match="leave `-b 8` out"):
        exec(check, scope)


def test_the_sweeps_line_is_checked_at_every_rate():
    """6.6g: poisson_at(rate) is right at each of RATES; one right at the first rate only (the
    rate written in) is refused at the second, naming what it says."""
    scope = stand_ins(2)
    solution, name, check = the_checks("06_triton_benchmarks", "function")[-1]
    assert name == "poisson_at" and '"6.6g"' in check
    exec(solution, scope)
    exec(check, scope)
    assert list(scope["sweep_lines"]) == scope["RATES"]
    solved = scope["poisson_at"]
    scope["poisson_at"] = lambda rate: solved(RATE)
    with pytest.raises(NotYet, match=r"poisson_at\(308\): your line offers 185 requests/s, not"):
        exec(check, scope)


def fragments():
    return [
        pytest.param(notebook, k, n_gpus, id=f"{notebook[:2]}-{k}-{n_gpus}gpu")
        for notebook in ("06_triton_benchmarks", "07_how_close_to_the_hardware")
        for k in range(len(the_checks(notebook, "config_fragment")))
        for n_gpus in (0, 1, 2)
    ]


@pytest.mark.parametrize("notebook, index, n_gpus", fragments())
def test_each_solved_fragment_passes_on_0_1_or_2_gpus(notebook, index, n_gpus):
    scope, _, check = checked(notebook, index, "config_fragment", n_gpus)
    exec(check, scope)


FOUR_PER_GPU = {  # 6.3c on the class's 2-GPU node: text -> passes
    "instance_group [ {count: 4, kind: KIND_GPU, gpus: [0]}, "
    "{count: 4, kind: KIND_GPU, gpus: [1]} ]": True,
    "instance_group [ { count: 4, kind: KIND_GPU } ]": True,
    "instance_group [ {count: 4, kind: KIND_GPU, gpus: [0]}, "
    "{count: 8, kind: KIND_GPU, gpus: [1]} ]": False,
}


@pytest.mark.parametrize("text, passes", FOUR_PER_GPU.items())
def test_the_testers_fragments_of_63c(text, passes):
    """6.3's need (instances per GPU, exercises.on_every_gpu) on the tester's spellings; the
    notebook now asks for it in the editor (6.3a) and applies 4 per GPU itself."""

    def check():
        needs = exercises.on_every_gpu(4, 2)
        return config_edits.config_fragment(text, "6.3", "four instances on every GPU", needs)

    if passes:
        check()
    else:
        with pytest.raises(NotYet, match="puts 4 on GPU 0 and 8 on GPU 1, not where the step"):
            check()


@pytest.mark.parametrize("n_gpus", [0, 1, 2])
def test_76_checks_shape_at_every_setting_of_the_sweep(n_gpus):
    """A shape() right at the sweep's first setting only is refused at the second."""
    scope = stand_ins(n_gpus)
    solution, name, check = the_checks("07_how_close_to_the_hardware", "function")[-1]
    assert name == "shape" and '"7.6"' in check
    exec(solution, scope)
    exec(check, scope)  # the solved shape(), at both settings
    solved = scope["shape"]
    scope["shape"] = lambda instances, max_batch, delay: solved(4, max_batch, delay)
    with pytest.raises(NotYet, match=r"^7\.6: shape\(8, 64, 500\): .* puts 4 on (GPU 0|the CPU)"):
        exec(check, scope)
    # without its gpus list, a group is on every GPU of the server, not on the first alone
    scope["shape"] = lambda *setting: solved(*setting).replace(", gpus: [ 0 ]", "")
    if n_gpus > 1:
        with pytest.raises(NotYet, match="puts 4 on GPU 0 and 4 on GPU 1, not where the step"):
            exec(check, scope)
    else:
        exec(check, scope)


class FakeResponse:
    status_code = 200
    headers = {"Server-Timing": "decode;dur=3.000, queue;dur=0.010, infer;dur=12.000"}


class FakeSession:
    """requests.Session's stand-in: each POST takes 20 ms; the server says it spent 15.01."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def post(self, url, json=None, timeout=None):
        time.sleep(0.02)
        return FakeResponse()


def test_44_checks_send_one_against_the_servers_own_timing(monkeypatch):
    """4.4 as notebook 4 calls it: the solved send_one passes, one in seconds is refused."""
    (solution, name, check), *_ = the_checks("04_fastapi_benchmarks", "function")
    assert name == "send_one" and '"4.4"' in check
    monkeypatch.setattr(step_needs.requests, "Session", FakeSession)
    exercises.given(FASTAPI="http://127.0.0.1:8000")
    scope = {"exercises": exercises, "time": time, "payload": {}}
    exec(solution, scope)
    exec(check, scope)
    assert 15 < scope["record"]["latency_ms"] < 1000
    exec(solution.replace("* 1000", ""), scope)  # the latency in seconds
    with pytest.raises(NotYet, match=r"less than the server's own time .*the unit looks wrong"):
        exec(check, scope)
