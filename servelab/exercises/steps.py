"""The table of steps: what the notebooks call to check what you wrote (introduced in notebook 3).

A check cell names its step and nothing more,

    line_c8 = exercises.perf_line(line_c8, "6.1b")
    exercises.file_edit(path, before, "6.3a")
    deploy = judgement.decide("6.3g", deploy, why_63g, per_device, OBJECTIVE_MS)

so the cell under a blank never shows the answer. This table finds the step, then calls the check
of its kind with what the step needs: what it is about (`what`, in words that name no value), the
answer key's needs (answer_key.py, plain here, sealed in the class edition: key.py) and the
notebook's values they are written with (given.py). The checks never look the table up.

    Perf      a perf_analyzer line (command_lines.perf_line)
    Curl      a curl line (command_lines.curl_line)
    Fragment  a config.pbtxt fragment (config_edits.config_fragment)
    Edit      an edit of a model's config.pbtxt in an editor (config_edits.file_edit)
    Result    what a call returns, and the call as written where no node answers (calls.result)
    Function  a function whose body you write: how the step calls it (calls.function)
    Decision  a judgement on your own rows (judges.py): the judge and the rows it reads
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from servelab import passes
from servelab.exercises import (
    answer_key,
    calls,
    command_lines,
    config_edits,
    judges,
    step_needs,
)
from servelab.exercises.answers import blank
from servelab.exercises.given import GIVEN, given, value, values
from servelab.exercises.key import Needs, Plain, Sealed, seal
from servelab.passes.node_calls import STATE

# the notebook's values, handed over with exercises.given (given.py; kept here for the notebooks)
__all__ = ["GIVEN", "given"]


@dataclass(frozen=True)
class Perf:
    what: str
    leave_out: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Curl:
    what: str


@dataclass(frozen=True)
class Fragment:
    what: str


@dataclass(frozen=True)
class Edit:
    what: str


@dataclass(frozen=True)
class Result:
    """check(value, *evidence) -> bool or raises step_needs.Wrong; where no node answers (prepare,
    review), the call as written is checked against the key's call.* fields."""

    what: str
    check: Callable
    hint: str = ""
    noun: str = "the call"
    where: str = "the text above it names the method"


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
    """judge(answer, reason, step, *evidence): a choice judged on your rows (judges.py)."""

    judge: Callable


# ---------------------------------------------------------------- the needs of a step


def sealed() -> bool:
    """Is this edition's answer key sealed (the class edition's)?"""
    return not hasattr(answer_key, "NEEDS")


def needs(step: str, **instead) -> Needs:
    """What step `step` needs, as its check asks it, with the notebook's values (`instead` in
    place of some); NotYet while a value it is written with is not handed over yet."""
    if sealed():
        found = Sealed(step, answer_key.SEALED[step], answer_key.SALT)
    else:
        found = Plain(step, answer_key.NEEDS[step])
    found.values = values(found.uses, **instead)
    return found


CANON = {Perf: command_lines.canonical, Curl: command_lines.url_words}
CANON |= {Fragment: config_edits.canonical, Edit: config_edits.canonical}
CANON |= {Result: calls.call_words}


def sealed_key(salt: str) -> dict:
    """The plain answer key sealed as Sealed reads it: {step: its digests} (the class edition's
    answer_key.py holds it)."""
    found = {}
    for step, plain in answer_key.NEEDS.items():
        kind = type(STEPS.get(step))
        if step == "7.6":  # its fragments' needs: the sweep's settings are its values
            kind = Fragment
        found[step] = seal(step, plain, CANON[kind], salt)
    return found


# ---------------------------------------------------------------- what the notebooks call


def step(name: str, kind: type):
    """The step `name` of the given kind; a notebook error (not the student's) otherwise."""
    found = STEPS.get(name)
    if not isinstance(found, kind):
        raise KeyError(f"no {kind.__name__} step named {name!r} in servelab/exercises/steps.py")
    return found


def perf_line(line, name: str):
    """Your perf_analyzer line for step `name`, checked (command_lines.perf_line): the perf.Line
    the next cells run."""
    known = step(name, Perf)
    return command_lines.perf_line(line, name, known.what, needs(name), known.leave_out)


def curl_line(line, name: str) -> str:
    """Your curl line for step `name`, checked (command_lines.curl_line)."""
    return command_lines.curl_line(line, name, step(name, Curl).what, needs(name))


def config_fragment(text, name: str) -> str:
    """Your config.pbtxt fragment for step `name`, checked (config_edits.config_fragment)."""
    return config_edits.config_fragment(text, name, step(name, Fragment).what, needs(name))


def file_edit(path, before: str, name: str) -> str:
    """Your edit of `path` for step `name`, checked (config_edits.file_edit): its diff."""
    return config_edits.file_edit(path, before, name, step(name, Edit).what, needs(name))


def result(value_, name: str, *evidence):
    """What the call you wrote for step `name` returned, checked (calls.result)."""
    known = step(name, Result)
    call = needs(name) if name in _keyed() else None
    return calls.result(
        value_,
        name,
        *evidence,
        what=known.what,
        check=known.check,
        hint=known.hint,
        noun=known.noun,
        where=known.where,
        call=call,
    )


def function(fn, name: str, *evidence):
    """The function you wrote for step `name`, called as the step calls it (calls.function)."""
    known = step(name, Function)
    return calls.function(
        fn,
        name,
        *evidence,
        what=known.what,
        run=known.run,
        where=known.where,
        offline=known.offline,
    )


def decide(name: str, answer, reason, *evidence):
    """Your choice for decision `name`, judged by its judge on `evidence`, your rows; your reason
    is kept beside it. In the measure pass a blank choice waits for review."""
    if blank(answer) and STATE["pass"] == passes.MEASURE:
        print(f"{name}: decide in the review pass (or now), from your rows; the bundle keeps them.")
        return None
    return step(name, Decision).judge(answer, reason, name, *evidence)


def _keyed() -> set[str]:
    return set(answer_key.SEALED if sealed() else answer_key.NEEDS)


# ---------------------------------------------------------------- a sweep's lines and fragments


def _line_at_each_rate(poisson_at) -> dict:
    """6.6g: poisson_at(rate) is 6.6d's line at every rate of the sweep, each checked as 6.6d
    checks its own: {rate: the checked line}."""
    lines = {}
    for rate in value("RATES"):
        known = step("6.6d", Perf)
        lines[rate] = command_lines.perf_line(
            poisson_at(rate),
            f"6.6g: poisson_at({rate})",
            known.what,
            needs("6.6d", RATE=rate),
            record=False,
        )
    return lines


def _shape_at_each_setting(shape) -> dict:
    """7.6: shape(instances, max_batch, delay) is the fragment of every setting of the sweep:
    {setting: the checked fragment}."""
    fragments = {}
    for setting in value("SWEEP"):
        text = shape(*setting)
        if not isinstance(text, str):
            raise step_needs.Wrong(f"shape{tuple(setting)} returned no text")
        instances, max_batch, delay = setting
        fragments[tuple(setting)] = config_edits.config_fragment(
            text,
            f"7.6: shape{tuple(setting)}",
            "the three fields of one configuration",
            needs("7.6", INSTANCES=instances, MAX_BATCH=max_batch, DELAY=delay),
        )
    return fragments


def _covering(runs: dict, load):
    """The run of `runs` ({rate: run}) at the lowest rate at or above `load`, or None."""
    rates = [r for r in sorted(runs) if r >= load]
    return runs[rates[0]] if rates else None


def _per_device_p95(per_device: dict) -> dict:
    return {n: run.measured("p95_ms") for n, run in per_device.items()}


# ---------------------------------------------------------------- the steps, notebook by notebook
# Each `what` names what the step is about in the lesson's words, never a value of its answer:
# the section the step is in says that, and a check that refuses an answer points there.

FOOD = "food_classifier"  # the model of notebooks 5 and 6: what a check asks the server about

STEPS: dict[str, object] = {
    # notebook 3
    "3.1": Curl("ask the FastAPI service whether it is healthy"),
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
        lambda answer, reason, name, one, two: judges.real_or_noise(
            answer, reason, name, "the second worker's gain", {"one worker": one, "two": two}
        )
    ),
    # notebook 5
    "5.1": Result(
        "the config Triton serves for food_classifier",
        lambda config: config["name"] == FOOD and "instance_group" in config,
        hint="the method named above returns the model's config, a dict whose name is the model's",
    ),
    "5.2": Function(
        "one photo through tritonclient",
        lambda classify, photo: step_needs.classified_as_served(
            classify, photo, value("TRITON"), FOOD
        ),
    ),
    "5.3": Curl("ask Triton for the model's statistics"),
    # notebook 6
    "6.1a": Perf("section 6.1's first load of the Python-backend model"),
    "6.1b": Perf("section 6.1's second load"),
    "6.1c": Perf("section 6.1's third load"),
    "6.1d": Curl("ask for the statistics of one version of the model"),
    "6.2": Perf("section 6.2's batches"),
    "6.3a": Edit("change the instance_group as section 6.3 asks"),
    "6.3b": Result(
        "load food_classifier again",
        lambda _: step_needs.model_ready(value("TRITON"), FOOD),
        hint="after the call the model must be READY (client.is_model_ready)",
    ),
    "6.3c": Perf("the load of 6.1b, on the new instances"),
    "6.3d": Fragment("6.3a's instances placed as section 6.3 asks, unevenly"),
    "6.3e": Result(
        "the stubs on GPU 0",
        step_needs.stubs_on_gpu0,
        hint="count the triton_python_backend_stub lines on GPU 0 in nvidia-smi (without a GPU, "
        "the stub processes `ps` shows)",
        noun="the number",
        where="the text above it says where to look",
    ),
    "6.3f": Edit("change the instance_group again, as section 6.3 asks"),
    "6.3g": Decision(
        lambda answer, reason, name, per_device, objective_ms: judges.cheapest(
            answer,
            reason,
            name,
            "the instances per GPU to deploy",
            _per_device_p95(per_device),
            objective_ms,
            "p95",
            fallback="none",
            per=" per device",
        )
    ),
    "6.3h": Decision(
        lambda answer, reason, name, run: judges.bottleneck(answer, reason, name, run.row)
    ),
    "6.4a": Perf("section 6.4's first load, of the ONNX model"),
    "6.4b": Edit("change food_classifier_onnx's instance_group as section 6.4 asks"),
    "6.4c": Perf("section 6.4's warm-up"),
    "6.4d": Perf("section 6.4's second load"),
    "6.4e": Perf("section 6.4's third load"),
    "6.6a": Edit("change food_classifier_onnx's instance_group as section 6.6 asks"),
    "6.6b": Perf("the capacity of one instance, as section 6.6 measures it"),
    "6.6c": Perf("section 6.6's rate RATE, the first way of spacing it"),
    "6.6d": Perf("section 6.6's rate RATE, the second way of spacing it"),
    "6.6e": Edit("add dynamic batching, as section 6.6 asks"),
    "6.6f": Perf("section 6.6's batch, sent as one request"),
    "6.6g": Function("6.6d's line at any rate", lambda fn: _line_at_each_rate(fn), offline=True),
    "6.6h": Decision(
        lambda answer, reason, name, options, load, objective_ms: judges.cheapest(
            answer,
            reason,
            name,
            "the configuration to deploy",
            {
                option: step_needs.mean_latency(run) if run else None
                for option, run in ((o, _covering(runs, load)) for o, runs in options.items())
            },
            objective_ms,
            "mean latency",
            fallback="more instances",
        )
    ),
    # notebook 7
    "7.2": Perf("notebook 7's first load"),
    "7.3a": Fragment("the input as raw pixels, as section 7.3 describes it"),
    "7.3b": Perf("7.2's load, with the input of 7.3a"),
    "7.4a": Perf(
        "7.2's load over the other protocol, as section 7.4 says",
        leave_out={
            "--shared-memory": "this run measures the protocol alone; shared memory is the next "
            "part of the step"
        },
    ),
    "7.4b": Function(
        "the class of the photo in the region",
        lambda by_reference, region, nbytes: step_needs.a_class(by_reference(region, nbytes)),
    ),
    "7.4c": Perf("7.4a's load, with the pixels in shared memory"),
    "7.5a": Fragment("the precision section 7.5 asks for"),
    "7.5b": Fragment("the CUDA graphs section 7.5 turns on"),
    "7.6": Function("the three fields of one configuration", _shape_at_each_setting, offline=True),
    "7.7": Fragment("the compiled model of section 7.7"),
    # notebook 8
    "8.1": Fragment("the ensemble's scheduling block"),
}
