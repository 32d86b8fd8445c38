"""servelab.exercises answers each kind of exercise in the student's terms, in one sentence."""

import re

import pytest

from servelab import exercises
from servelab.exercises import NotYet

HOST = "127.0.0.1:8000"


def sentence(call) -> str:
    with pytest.raises(NotYet) as caught:
        call()
    text = str(caught.value)
    assert caught.value._render_traceback_() == [text]  # what Jupyter shows: no traceback
    assert "\n" not in text and text.endswith("."), text
    return text


def perf(line, **needs):
    return exercises.perf_line(line, "6.1", "the step measures 8 requests in flight", needs=needs)


def test_a_blank_says_what_to_write_and_where():
    for blank in (..., "...", "  "):
        text = sentence(lambda: perf(blank))
        assert text.startswith("6.1: replace the `...` in the cell above with your perf_analyzer")
        assert "8 requests in flight" in text and ". " not in text


def test_perf_line_flags_in_the_students_terms():
    needs = {"-m": "food_classifier", "-u": HOST, "--concurrency-range": "8"}
    line = f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8"
    assert perf(line, **needs) == line
    assert perf(line.replace("range 8", "range=8:8"), **needs)  # same flag, other spellings
    assert sentence(lambda: perf(line.replace(" --concurrency-range 8", ""), **needs)) == (
        "6.1: the step measures 8 requests in flight: your line has no `--concurrency-range 8`."
    )
    assert "says `--concurrency-range 16`, the step needs `--concurrency-range 8`" in sentence(
        lambda: perf(line.replace("range 8", "range 16"), **needs)
    )
    assert "starts with `perf_analyzer`, yours with `curl`" in sentence(
        lambda: perf("curl -s x", **needs)
    )
    assert "check its quotes" in sentence(lambda: perf('perf_analyzer -m "food', **needs))
    assert "leave `-f out.csv` out of your line: the lab names" in sentence(lambda: perf(line + " -f out.csv", **needs))
    assert "not a text" in sentence(lambda: perf(8, **needs))
    async_line = (
        "perf_analyzer -m m --async --request-rate-range 120 --request-distribution poisson"
    )
    assert perf(async_line, **{"--async": None, "--request-distribution": "poisson"})
    assert "no `--async`" in sentence(
        lambda: perf(async_line.replace(" --async", ""), **{"--async": None})
    )


def config(text, **needs):
    return exercises.config_fragment(text, "6.3", "two instances on every GPU", needs=needs)


def test_config_fragment_goes_through_tritons_schema():
    text = "instance_group [ { count: 2, kind: KIND_GPU } ]"
    assert config(text, **{"instance_group.count": 2, "instance_group.kind": "KIND_GPU"}) == text
    misspelt = sentence(lambda: config(text.replace("count", "cont")))
    assert "is not config.pbtxt that Triton accepts" in misspelt and "cont" in misspelt
    assert "has `instance_group.count: 1`, not `instance_group.count: 2`" in sentence(
        lambda: config(text.replace("2", "1"), **{"instance_group.count": 2})
    )
    batching = "dynamic_batching { preferred_batch_size: [ 4, 6, 8 ] }"
    assert config(batching, **{"dynamic_batching.preferred_batch_size": [4, 6, 8]})
    assert "has no `dynamic_batching`" in sentence(lambda: config(text, dynamic_batching=None))


def test_curl_line_asks_the_right_url_and_pipes_it():
    url = f"http://{HOST}/v2/models/food_classifier/stats"

    def curl(line):
        return exercises.curl_line(line, "5.6", "Triton's statistics", url=url)

    good = f"curl -s {url} | python -m json.tool"
    assert curl(good) == good and curl(good.replace(" | ", "|"))
    assert curl(good.replace(f"http://{HOST}", HOST))  # curl takes host:port without http://
    assert "pipe curl's answer through `| python -m json.tool`" in sentence(
        lambda: curl(f"curl -s {url}")
    )
    assert "asks for `/v2/models/food_classifier`" in sentence(
        lambda: curl(good.replace("/stats", ""))
    )
    assert "from this Jupyter the service is at `http://127.0.0.1:8000`" in sentence(
        lambda: curl(good.replace(HOST, "localhost:8000"))
    )


def test_results_and_functions():
    def check(value):
        return value["name"] == "food_classifier"

    answer = {"name": "food_classifier"}
    assert exercises.result(answer, "5.3", "the config", check=check) is answer
    assert "replace the `...` in the cell above with the call" in sentence(
        lambda: exercises.result(..., "5.3", "the config", check=check)
    )
    assert "your answer is {'name': 'x'}; name the model" in sentence(
        lambda: exercises.result({"name": "x"}, "5.3", "the config", check, "name the model")
    )

    def send_one(x):
        """Docstring."""
        ...

    def twice(x):
        return 2 * x

    def broken(x):
        return x / 0

    assert "with the body of send_one()" in sentence(
        lambda: exercises.function(send_one, "4.4", "time one request", (1,))
    )
    assert exercises.function(twice, "4.4", "double", (2,), check=lambda r: r == 4) == 4
    assert re.search(
        r"broken\(\) stopped with ZeroDivisionError: .*fix it in the cell above",
        sentence(lambda: exercises.function(broken, "4.4", "divide", (1,))),
    )
    assert "twice() returned 4; a dict" in sentence(
        lambda: exercises.function(twice, "4.4", "x", (2,), check=lambda r: False, hint="a dict")
    )


def test_an_edit_made_in_an_editor(tmp_path):
    path = tmp_path / "config.pbtxt"
    before = 'name: "m"\ninstance_group [ { count: 1, kind: KIND_CPU } ]\n'
    path.write_text(before)

    def edited():
        return exercises.file_edit(
            path, before, "6.3", "set count: 2", needs={"instance_group.count": 2}
        )

    assert "is unchanged: open it in JupyterLab's editor" in sentence(edited)
    path.write_text(before.replace("count: 1", "cont: 2"))
    assert "the file is not config.pbtxt that Triton accepts" in sentence(edited)
    path.write_text(before.replace("count: 1", "count: 2"))
    diff = edited()
    assert "-instance_group [ { count: 1" in diff and "+instance_group [ { count: 2" in diff
