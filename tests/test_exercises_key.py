"""The answer key, plain (the solved edition, the tests) and sealed (the class edition), and what a
check says with it: every correct spelling accepted, every wrong one refused, and a refusal that
says what the answer does against what the step asks, never the step's value (issue 51)."""

from __future__ import annotations

import re

import pytest
from test_exercise_call_sites import stand_ins

from servelab import exercises
from servelab.exercises import NotYet, answer_key, key, steps
from servelab.perf import flags

PLAIN = dict(answer_key.NEEDS)
SALT = "test-salt"
# the values a step's check is handed beyond notebook 6's: notebook 3's address, a sweep's setting
SWEEP_SETTING = {"FASTAPI": "http://127.0.0.1:8002", "INSTANCES": 4, "MAX_BATCH": 64, "DELAY": 500}
PERF_STEPS = [s for s, kind in steps.STEPS.items() if isinstance(kind, steps.Perf)]


@pytest.fixture(params=["plain", "sealed"])
def edition(request, monkeypatch):
    """The checks with the solved edition's plain key, then with the class edition's sealed one."""
    if request.param == "sealed":
        sealed = steps.sealed_key(SALT)
        monkeypatch.delattr(answer_key, "NEEDS")
        monkeypatch.setattr(answer_key, "SEALED", sealed, raising=False)
        monkeypatch.setattr(answer_key, "SALT", SALT, raising=False)
        assert steps.sealed()
    stand_ins(2)
    return request.param


def filled(template) -> str | None:
    """A need as the notebook's values (stand_ins) make it; None for a switch."""
    if template is None:
        return None
    known = {**SWEEP_SETTING, **exercises.steps.GIVEN}
    return str(template).format(**{n: known[n] for n in key.names_in(template)})


def line_of(needs: dict, drop: str = "", instead: tuple = ()) -> str:
    """The perf_analyzer line that writes out each need (`drop` left out, `instead`: (flag, value)
    in place of its need)."""
    words = ["perf_analyzer"]
    for flag, template in needs.items():
        if flag == drop:
            continue
        value = instead[1] if instead and instead[0] == flag else filled(template)
        words += [flag] if value is None else [flag, value]
    return " ".join(words)


def another(flag: str, value: str) -> str:
    """A value of `flag` that is not `value` (and not a value any step of the lab asks for)."""
    try:
        return str(int(float(value)) + 3)
    except ValueError:
        pass
    return {
        "-m": "other_model",
        "-u": "10.0.0.9:8000",
        "-i": "http",
        "--shape": "input:1,2,3",
        "--input-data": "zero",
        "--request-distribution": "poisson" if value == "constant" else "constant",
        "--shared-memory": "cuda",
    }[flag]


def nowhere(value: str, said: str) -> bool:
    """`value` is not a word of `said` (6.1 in "section 6.1" is no 1)."""
    return not re.search(rf"(?<![\w.:/-]){re.escape(value)}(?![\w.:/-])", said)


@pytest.mark.parametrize("step", PERF_STEPS)
def test_a_refusal_of_a_wrong_line_carries_no_value_of_the_step(edition, step):
    """Over every perf step: its line passes; each flag left out or given another value is
    refused in one sentence that holds neither the flag's expected value nor the pair to copy,
    and points to the section and `perf_analyzer --help`."""
    needs = PLAIN[step]
    assert exercises.perf_line(line_of(needs), step)
    for flag, template in needs.items():
        want = filled(template)
        wrong = [line_of(needs, drop=flag)]
        if want is not None:
            wrong.append(line_of(needs, instead=(flag, another(flag, want))))
        for line in wrong:
            try:
                exercises.perf_line(line, step)
            except NotYet as exc:
                said = str(exc)
            else:  # left out, perf_analyzer's default is the step's value: right
                assert line == wrong[0] and want is not None, (step, line)
                continue
            assert "\n" not in said and said.endswith("."), said
            assert said.startswith(f"{step}: your line ") and "perf_analyzer --help" in said, said
            if want is not None:
                assert nowhere(want, said), (step, flag, said)
                assert f"{flag} {want}" not in said, said


def test_perf_analyzers_defaults_written_out_or_left_out(edition):
    """Issue 51's refused-correct lines: 6.1a and 6.2 without `--concurrency-range 1`, 6.4a with
    `--input-data random`, 6.6c without `--request-distribution constant`."""
    for step, line in (
        ("6.1a", line_of(PLAIN["6.1a"], drop="--concurrency-range")),
        ("6.2", line_of(PLAIN["6.2"], drop="--concurrency-range")),
        ("6.4a", line_of(PLAIN["6.4a"]) + " --input-data random"),
        ("6.4a", line_of(PLAIN["6.4a"], drop="--concurrency-range") + " --input-data=random"),
        ("6.6c", line_of(PLAIN["6.6c"], drop="--request-distribution")),
        ("6.6c", line_of(PLAIN["6.6c"]) + " -b 1 -i HTTP --shared-memory none"),
    ):
        assert exercises.perf_line(line, step) == line
    # and a default is no answer where the step asks for another value
    with pytest.raises(NotYet, match="keeps 1 request in flight .perf_analyzer's default., not"):
        exercises.perf_line(line_of(PLAIN["6.1b"], drop="--concurrency-range"), "6.1b")
    with pytest.raises(NotYet, match="spaces its requests evenly .perf_analyzer's default., not"):
        exercises.perf_line(line_of(PLAIN["6.6d"], drop="--request-distribution"), "6.6d")
    with pytest.raises(NotYet, match="leave `--concurrency-range 1` out of your line"):
        exercises.perf_line(line_of(PLAIN["6.6c"]) + " --concurrency-range 1", "6.6c")


def test_6_3d_all_on_gpu_0_and_nothing_else(edition):
    """Issue 51's accepted-wrong 6.3d: a fragment that also adds `dynamic_batching { }`."""
    right = "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]"
    assert exercises.config_fragment(right, "6.3d") == right
    with pytest.raises(NotYet, match="also sets `dynamic_batching`, which the step does not ask"):
        exercises.config_fragment(f"{right}\ndynamic_batching {{ }}", "6.3d")
    with pytest.raises(NotYet, match="puts 2 on GPU 0 and 2 on GPU 1, not where the step puts"):
        exercises.config_fragment("instance_group [ { count: 2, kind: KIND_GPU } ]", "6.3d")


def test_every_kind_of_step_says_the_same_with_either_key(edition, tmp_path):
    """A curl line, a fragment, an edit and a call as written, right and wrong, in both editions."""
    triton = exercises.steps.GIVEN["TRITON"]
    stats = f"curl -s {triton}/v2/models/food_classifier/versions/1/stats | python -m json.tool"
    assert exercises.curl_line(stats, "6.1d") == stats
    with pytest.raises(NotYet, match="asks for `/v2/models/food_classifier/stats`, not what"):
        exercises.curl_line(stats.replace("/versions/1", ""), "6.1d")
    raw = 'input [ { name: "input" data_type: TYPE_UINT8 dims: [ 224, 224, 3 ] } ]'
    assert exercises.config_fragment(raw, "7.3a") == raw
    with pytest.raises(NotYet, match="has `input.data_type: TYPE_FP32`, not what the step asks"):
        exercises.config_fragment(raw.replace("UINT8", "FP32"), "7.3a")
    with pytest.raises(NotYet, match="also sets `input.format`"):
        exercises.config_fragment(raw.replace("] }", "] format: FORMAT_NHWC }"), "7.3a")
    with pytest.raises(NotYet, match="does not set everything the step asks: section 7.3"):
        exercises.config_fragment('input [ { name: "input" } ]', "7.3a")
    path = tmp_path / "config.pbtxt"
    before = 'name: "m"\nmax_batch_size: 16\n'
    block = (
        "dynamic_batching { preferred_batch_size: [ 8, 4, 6 ] max_queue_delay_microseconds: 100 }"
    )
    path.write_text(before + block)
    assert "+dynamic_batching" in exercises.file_edit(path, before, "6.6e")
    path.write_text(before + block.replace("100", "500"))
    with pytest.raises(NotYet, match="has `dynamic_batching.max_queue_delay_microseconds: 500`"):
        exercises.file_edit(path, before, "6.6e")
    from servelab.passes import OfflineCall

    client = OfflineCall("client")
    call = client.load_model("food_classifier", headers={})
    assert exercises.result(call, "6.3b") is call
    for wrong, said in (
        (client.unload_model("food_classifier", headers={}), "uses `unload_model`"),
        (client.load_model("food_classifier_onnx", headers={}), "not for the model"),
        (client.load_model(model_name="food_classifier", headers={}), None),
        (client.load_model("food_classifier"), "lacks a keyword the step needs"),
    ):
        if said is None:
            assert exercises.result(wrong, "6.3b") is wrong
            continue
        with pytest.raises(NotYet, match=said):
            exercises.result(wrong, "6.3b")


@pytest.mark.parametrize("step", sorted(PLAIN))
def test_what_a_step_is_about_names_no_value_of_its_answer(step):
    """The words a check says of its step (`what`, in the blank's sentence and every refusal)
    hold none of the step's values."""
    stand_ins(2)
    what = steps.STEPS[step].what
    for template in PLAIN[step].values():
        for value in re.split(r"[\s/:,]+", str(filled(template) or "")):
            if len(value) > 1 and value not in ("input", "on", "v2", "models"):
                assert nowhere(value, what), (step, value, what)


def test_the_sealed_key_holds_no_value_and_uses_what_the_plain_one_does():
    sealed = steps.sealed_key(SALT)
    assert set(sealed) == set(PLAIN)
    for step, plain in PLAIN.items():
        assert sealed[step]["count"] == len(plain)
        assert set(sealed[step]["uses"]) == set(key.Plain(step, plain).uses)
        assert all(re.fullmatch(r"[0-9a-f]{24}", d) for d in sealed[step]["digests"])
    assert steps.sealed_key(SALT) == sealed and steps.sealed_key("other") != sealed


def test_the_perf_flags_a_step_asks_for_are_ones_the_checks_know():
    for step in PERF_STEPS:
        assert {flags.canonical(f) for f in PLAIN[step]} <= set(
            exercises.command_lines.VOCABULARY
        ), step
