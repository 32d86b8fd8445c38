"""What each exercise of notebooks 3 to 7 needs: the expected answers, in this one module (as the
answer key lives in docs/).

A check cell names its step and nothing more,

    line_c8 = exercises.perf_line(line_c8, "6.1b")
    exercises.file_edit(path, before, "6.3a")
    deploy = judgement.decide("6.3g", deploy, why_63g, per_device, OBJECTIVE_MS)

so the cell under a blank never shows the answer. A step's needs are written with the notebook's
own variables, `{HOST}`, `{RATE}`, ..., which the notebook hands over once it has them:

    exercises.given(HOST=HOST, PERF_INPUT=PERF_INPUT, TRITON=TRITON)

Kinds of step (each checked by the module its kind names):

    Perf      a perf_analyzer line: the flags it needs (command_lines.perf_line)
    Curl      a curl line: the URL it asks (command_lines.curl_line)
    Fragment  a config.pbtxt fragment: the fields it sets (config_edits.config_fragment)
    Edit      an edit of a model's config.pbtxt in an editor (config_edits.file_edit)
    Result    what a call returns, and the call as written where no node answers (calls.result)
    Function  a function whose body you write: how the step calls it (calls.function)
    Decision  a judgement on your own rows (judgement.decide): the judge and its question
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from servelab.exercises import judgement, step_needs
from servelab.exercises.answers import NotYet

# the notebook's own values the needs are written with (exercises.given)
GIVEN: dict = {}


def given(**values) -> None:
    """Hand the checks the notebook's values its steps are written with (HOST, RATE, N_GPUS, ...):
    your lines are compared with the needs these make."""
    GIVEN.update(values)


def value(name: str):
    if name not in GIVEN:
        raise NotYet(f"run the cell that sets {name} first: the checks compare your lines with it.")
    return GIVEN[name]


def filled(template):
    """A need written with the notebook's values ("{HOST}") as it reads with them now."""
    if isinstance(template, str) and "{" in template:
        names = [part.split("}")[0] for part in template.split("{")[1:]]
        return template.format(**{n: value(n) for n in names})
    return template


@dataclass(frozen=True)
class Perf:
    what: str
    needs: dict
    leave_out: dict = field(default_factory=dict)

    def resolved(self) -> tuple[str, dict]:
        return filled(self.what), {flag: filled(v) for flag, v in self.needs.items()}


@dataclass(frozen=True)
class Curl:
    what: str
    url: str


@dataclass(frozen=True)
class Fragment:
    what: str
    needs: Callable[[], dict] | dict


@dataclass(frozen=True)
class Edit:
    what: str
    needs: Callable[[], dict] | dict


@dataclass(frozen=True)
class Result:
    """check(value, *evidence) -> bool or raises step_needs.Wrong; `call`: the method and the
    arguments the call must name, checked as written where no node answers (prepare, review)."""

    what: str
    check: Callable
    hint: str = ""
    noun: str = "the call"
    where: str = "the text above it names the method"
    call: tuple | None = None


@dataclass(frozen=True)
class Function:
    """run(fn, *evidence): what the step gets of your function (it calls it, checks what came
    back, raises NotYet or step_needs.Wrong); `offline`: the step needs no node to call it."""

    what: str
    run: Callable
    where: str = "its docstring says what it returns"
    offline: bool = False


@dataclass(frozen=True)
class Decision:
    """judge(answer, reason, step, *evidence): a choice judged on your rows (judgement.py)."""

    judge: Callable


def needs_of(need) -> dict:
    return need() if callable(need) else need


# ---------------------------------------------------------------- the steps, notebook by notebook

FOOD, ONNX = "food_classifier", "food_classifier_onnx"
_61 = {"-m": FOOD, "-u": "{HOST}", "--input-data": "{PERF_INPUT}"}  # the Python-backend model
_64 = {"-m": ONNX, "-u": "{HOST}", "--shape": "input:3,224,224"}  # the ONNX model's tensor
_RATE = {**_64, "--async": None}  # an open loop: as many in flight as the schedule needs
_73 = {
    "-m": "{MODEL}",
    "-u": "{HOST}",
    "--concurrency-range": "{CLIENTS}",
    "--async": None,
    "--shape": "input:224,224,3",
}
_GRPC = {**_73, "-u": "{GRPC_HOST}", "-i": "grpc"}
_BATCHING = {
    "dynamic_batching.preferred_batch_size": step_needs.AnyOrder([4, 6, 8]),
    "dynamic_batching.max_queue_delay_microseconds": 100,
}


def _gpus() -> int:
    return int(value("N_GPUS"))


STEPS: dict[str, object] = {
    # notebook 3
    "3.1": Curl("ask the FastAPI service's /health", "{FASTAPI}/health"),
    # notebook 4
    "4.2": Result(
        "the body of a /predict request",
        step_needs.base64_body,
        hint='the service expects {"image": the file\'s bytes in base64, as text}',
        noun="the dict",
        where="the text above it says what it holds",
    ),
    "4.4": Function(
        "send one request, time it, collect its status and Server-Timing",
        lambda send_one, payload: step_needs.send_one_timed(
            send_one, f"{value('FASTAPI')}/predict", payload
        ),
    ),
    "4.7": Decision(
        lambda answer, reason, step, one, two: judgement.real_or_noise(
            answer, reason, step, "the second worker's gain", {"one worker": one, "two": two}
        )
    ),
    # notebook 5
    "5.1": Result(
        "the config Triton serves for food_classifier",
        lambda config: config["name"] == FOOD and "instance_group" in config,
        hint="get_model_config(model name) returns a dict whose name is the model's",
        call=("get_model_config", (FOOD,), ()),
    ),
    "5.2": Function(
        "one photo through tritonclient",
        lambda classify, photo: step_needs.classified_as_served(
            classify, photo, value("TRITON"), FOOD
        ),
    ),
    "5.3": Curl("ask for food_classifier's statistics", "{TRITON}/v2/models/food_classifier/stats"),
    # notebook 6
    "6.1a": Perf("the step measures 1 request in flight", {**_61, "--concurrency-range": 1}),
    "6.1b": Perf("the step measures 8 requests in flight", {**_61, "--concurrency-range": 8}),
    "6.1c": Perf("the step measures 16 requests in flight", {**_61, "--concurrency-range": 16}),
    "6.1d": Curl(
        "ask for version 1 of food_classifier's statistics",
        "{TRITON}/v2/models/food_classifier/versions/1/stats",
    ),
    "6.2": Perf(
        "the step sends batches of 16 images, one at a time",
        {**_61, "-b": 16, "--concurrency-range": 1},
    ),
    "6.3a": Edit(
        "set the instance_group to 2 instances on every GPU",
        lambda: step_needs.on_every_gpu(2, _gpus()),
    ),
    "6.3b": Result(
        "load food_classifier again",
        lambda _: step_needs.model_ready(value("TRITON"), FOOD),
        hint="after load_model the model must be READY (client.is_model_ready)",
        call=("load_model", (FOOD,), ("headers",)),
    ),
    "6.3c": Perf("the same load as 6.1b, on the new instances", {**_61, "--concurrency-range": 8}),
    # judged for the class's node, two GPUs (or all of a larger node's)
    "6.3d": Fragment(
        "all of 6.3a's instances on GPU 0, none on the other GPUs",
        lambda: step_needs.on_first_gpu(2 * max(_gpus(), 2), max(_gpus(), 2)),
    ),
    "6.3e": Result(
        "the stubs on GPU 0",
        step_needs.stubs_on_gpu0,
        hint="count the triton_python_backend_stub lines on GPU 0 in nvidia-smi (without a GPU, "
        "the stub processes `ps` shows)",
        noun="the number",
        where="the text above it says where to look",
    ),
    "6.3f": Edit(
        "set the instance_group to 4 instances on every GPU",
        lambda: step_needs.on_every_gpu(4, _gpus()),
    ),
    "6.3g": Decision(
        lambda answer, reason, step, per_device, objective_ms: judgement.cheapest(
            answer,
            reason,
            step,
            "the instances per GPU to deploy",
            {n: run.measured("p95_ms") for n, run in per_device.items()},
            objective_ms,
            "p95",
            fallback="none",
            per=" per device",
        )
    ),
    "6.3h": Decision(
        lambda answer, reason, step, run: judgement.bottleneck(answer, reason, step, run.row)
    ),
    "6.4a": Perf(
        "the step measures the ONNX model, 1 in flight", {**_64, "--concurrency-range": 1}
    ),
    "6.4b": Edit(
        "set food_classifier_onnx's instance_group to 2 instances on every GPU",
        lambda: step_needs.on_every_gpu(2, _gpus()),
    ),
    "6.4c": Perf(
        "the warm-up: 8 in flight for a fixed count of 100 requests",
        {**_64, "--concurrency-range": 8, "--request-count": 100},
    ),
    "6.4d": Perf("the ONNX model, 8 in flight", {**_64, "--concurrency-range": 8}),
    "6.4e": Perf("the ONNX model, 16 in flight", {**_64, "--concurrency-range": 16}),
    "6.6a": Edit(
        "set food_classifier_onnx back to one instance, on GPU 0",
        lambda: step_needs.on_first_gpu(1, _gpus()),
    ),
    "6.6b": Perf(
        "the capacity: 4 in flight, so the instance never waits for work",
        {**_64, "--concurrency-range": 4},
    ),
    "6.6c": Perf(
        "the step offers {RATE} requests/s, evenly spaced",
        {**_RATE, "--request-rate-range": "{RATE}", "--request-distribution": "constant"},
    ),
    "6.6d": Perf(
        "the step offers {RATE} requests/s at random moments",
        {**_RATE, "--request-rate-range": "{RATE}", "--request-distribution": "poisson"},
    ),
    "6.6e": Edit("add dynamic batching, preferred 4, 6, 8, at most 100 µs", _BATCHING),
    "6.6f": Perf(
        "a batch of 8 images, one request at a time", {**_64, "-b": 8, "--concurrency-range": 1}
    ),
    "6.6g": Function(
        "the Poisson line at any rate",
        lambda poisson_at: step_needs.line_at_each_rate(
            poisson_at,
            value("RATES"),
            lambda rate: Perf(
                f"the step offers {rate} requests/s at random moments",
                {**_RATE, "--request-rate-range": rate, "--request-distribution": "poisson"},
            ),
        ),
        offline=True,
    ),
    "6.6h": Decision(
        lambda answer, reason, step, options, objective_ms: judgement.cheapest(
            answer,
            reason,
            step,
            "the configuration to deploy",
            {name: step_needs.mean_latency(run) for name, run in options.items()},
            objective_ms,
            "mean latency",
            fallback="more instances",
        )
    ),
    # notebook 7
    "7.2": Perf(
        "the start, {CLIENTS} one-image requests in flight", {**_73, "--shape": "input:3,224,224"}
    ),
    "7.3a": Fragment(
        "raw pixels, 224 x 224 x 3 bytes per image",
        {"input.name": "input", "input.data_type": "TYPE_UINT8", "input.dims": [224, 224, 3]},
    ),
    "7.3b": Perf("the same load, with uint8 pixels of 224 x 224 x 3", _73),
    "7.4a": Perf(
        "the same load over gRPC",
        _GRPC,
        leave_out={
            "--shared-memory": "this run measures gRPC alone; shared memory is the next part "
            "of the step"
        },
    ),
    "7.4b": Function(
        "the class of the photo in the region",
        lambda by_reference, region, nbytes: step_needs.a_class(by_reference(region, nbytes)),
    ),
    "7.4c": Perf(
        "gRPC with the pixels in system shared memory", {**_GRPC, "--shared-memory": "system"}
    ),
    "7.5a": Fragment("half precision", {"parameters.precision.string_value": "fp16"}),
    "7.5b": Fragment("CUDA graphs", {"parameters.cuda_graphs.string_value": "on"}),
    "7.6": Function(
        "the three fields of one configuration",
        lambda shape: step_needs.shape_at_each_setting(shape, value("SWEEP"), _gpus()),
        offline=True,
    ),
    "7.7": Fragment("the compiled model", {"parameters.compile.string_value": "on"}),
}


def step(name: str, kind: type):
    """The step `name` of the given kind; a notebook error (not the student's) otherwise."""
    found = STEPS.get(name)
    if not isinstance(found, kind):
        raise KeyError(f"no {kind.__name__} step named {name!r} in servelab/exercises/steps.py")
    return found
