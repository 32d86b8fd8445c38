"""servelab.exercises answers each kind of exercise in the student's terms, in one sentence."""

import re
import time
import types

import pytest

from servelab import exercises
from servelab import perf as perf_runs
from servelab.exercises import NotYet, calls, command_lines, config_edits, step_needs
from servelab.perf import flags as perf_flags

HOST = "127.0.0.1:8000"


def sentence(call) -> str:
    with pytest.raises(NotYet) as caught:
        call()
    text = str(caught.value)
    assert caught.value._render_traceback_() == [text]  # what Jupyter shows: no traceback
    assert "\n" not in text and text.endswith("."), text
    return text


def perf(line, **needs):
    return command_lines.perf_line(line, "6.1", "section 6.1's second load", needs)


def test_a_blank_says_what_to_write_and_where():
    for blank in (..., "...", "  "):
        text = sentence(lambda: perf(blank))
        assert text.startswith("6.1: replace the `...` in the cell above with your perf_analyzer")
        assert "section 6.1's second load" in text and ". " not in text


def test_perf_line_flags_in_the_students_terms():
    """A refusal says what the line measures against what the step asks, and where to look; never
    the flag and value to copy."""
    needs = {"-m": "food_classifier", "-u": HOST, "--concurrency-range": "8"}
    line = f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8"
    assert perf(line, **needs) == line
    assert perf(line.replace("range 8", "range=8:8"), **needs)  # same flag, other spellings
    assert sentence(lambda: perf(line.replace(" --concurrency-range 8", ""), **needs)) == (
        "6.1: your line keeps 1 request in flight (perf_analyzer's default), not the load the "
        "step asks for: section 6.1 says which, and `perf_analyzer --help` how to write it."
    )
    said = sentence(lambda: perf(line.replace("range 8", "range 16"), **needs))
    assert "your line keeps 16 requests in flight, not the load the step asks for" in said
    assert not re.search(r"(?<![\w.])8(?!\w)", said)  # the step's value, nowhere
    assert "your line names no model, where the step measures one" in sentence(
        lambda: perf(line.replace("-m food_classifier ", ""), **needs)
    )
    assert "starts with `perf_analyzer`, yours with `curl`" in sentence(
        lambda: perf("curl -s x", **needs)
    )
    assert "check its quotes" in sentence(lambda: perf('perf_analyzer -m "food', **needs))
    assert "leave `-f out.csv` out of your line: the lab names" in sentence(
        lambda: perf(line + " -f out.csv", **needs)
    )
    assert "not a text" in sentence(lambda: perf(8, **needs))
    async_line = (
        "perf_analyzer -m m --async --request-rate-range 120 --request-distribution poisson"
    )
    rate = {"-m": "m", "--request-rate-range": 120, "--request-distribution": "poisson"}
    assert perf(async_line, **rate, **{"--async": None})
    assert perf(async_line.replace("--async", "-a"), **rate, **{"--async": None})  # -a: --async
    assert "waits for each answer before it sends the next request" in sentence(
        lambda: perf(async_line.replace(" --async", ""), **rate, **{"--async": None})
    )


# ---------------------------------------------------------------- a line carries what is allowed

LINE_61 = f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8 --input-data in.json"
NEEDS_61 = {"-m": "food_classifier", "-u": HOST, "--input-data": "in.json"}
LINE_66 = (
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    "--request-rate-range 185 --request-distribution constant"
)
NEEDS_66 = {
    "-m": "food_classifier_onnx",
    "-u": HOST,
    "--shape": "input:3,224,224",
    "--async": None,
    "--request-rate-range": 185,
    "--request-distribution": "constant",
}


def c8(line, **kwargs):
    needs = {**NEEDS_61, "--concurrency-range": "8"}
    return command_lines.perf_line(line, "6.1", "section 6.1's second load", needs, **kwargs)


def evenly(line, **kwargs):
    return command_lines.perf_line(line, "6.6", "section 6.6's rate", NEEDS_66, **kwargs)


@pytest.mark.parametrize(
    "extra, named, why",
    [
        ("-b 16", "-b 16", "every request a batch of that many inputs"),  # the tester's 6.1a
        ("-b16", "-b16", "every request a batch"),
        ("--async", "--async", "how the client keeps its requests in flight"),
        ("--request-rate-range 100", "--request-rate-range 100", "an open-loop load"),
        ("--shared-memory system", "--shared-memory system", "into shared memory"),
        ("-i grpc", "-i grpc", "the protocol (HTTP or gRPC)"),
        ("--shape INPUT_IMAGE:1", "--shape INPUT_IMAGE:1", "the shape of the tensor"),
        ("--percentile 95", "--percentile 95", "leaves the mean latency out of the CSV"),
        ("--max-threads 4", "--max-threads 4", "how many client threads"),
        ("-H x:y", "-H x:y", "a header to every request"),
        ("--streaming", "--streaming", "streams the requests over gRPC"),
        ("-x 2", "-x 2", "another version of the model"),
        ("--string-length 4", "--string-length 4", "what each request carries"),
    ],
)
def test_a_flag_that_changes_what_is_measured_is_refused_with_its_name_and_why(extra, named, why):
    said = sentence(lambda: c8(f"{LINE_61} {extra}"))
    assert said.startswith("6.1: "), said
    assert f"leave `{named}` out of your line: " in said and why in said, said


def test_a_rate_step_refuses_a_batch_and_a_closed_loop():
    assert evenly(LINE_66) == LINE_66
    assert "leave `-b 8` out of your line: it makes every request a batch" in sentence(
        lambda: evenly(LINE_66 + " -b 8")  # the tester's 6.6b
    )
    closed = LINE_66.replace("--request-rate-range", "--concurrency-range")
    assert "leave `--concurrency-range 185` out of your line: it sets a closed-loop load" in (
        sentence(lambda: evenly(closed))
    )
    assert "leave `--sync` out" in sentence(lambda: evenly(LINE_66 + " --sync"))


@pytest.mark.parametrize(
    "extra",
    [
        "-p 1000",
        "--measurement-interval=1000",
        "-s 50",
        "--stability-percentage 50",
        "-r 5",
        "--max-trials 5",
        "--request-count 50",
        "--warmup-request-count 10",
        "--measurement-mode count_windows --measurement-request-count 50",
        "-v",
        "--verbose-csv",
        "-v -p1000",
        "-b 1",  # perf_analyzer's defaults, written out
        "-b1",
        "-i http",
        "--shared-memory none",
    ],
)
def test_flags_of_length_verbosity_or_the_default_stay(extra):
    assert c8(f"{LINE_61} {extra}")


def test_a_step_may_allow_more_and_name_its_reason_to_leave_one_out():
    assert c8(f"{LINE_61} --async", allows={"--async"})
    assert c8(f"{LINE_61} -a", allows={"-a"})  # either spelling, in the line or in allows
    said = sentence(
        lambda: c8(
            f"{LINE_61} -i grpc --shared-memory system",
            allows={"-i"},
            leave_out={"--shared-memory": "shared memory is the next part of the step"},
        )
    )
    assert said.endswith(
        "leave `--shared-memory system` out of your line: shared memory is the next part of the "
        "step."
    )
    # leave_out wins over a default or a length flag: the step said why
    assert "leave `-p 1000` out" in sentence(
        lambda: c8(f"{LINE_61} -p 1000", leave_out={"-p": "the step sets the windows"})
    )


# ---------------------------------------------------------------- one flag, many spellings


def batch16(line):
    needs = {**NEEDS_61, "-b": "16", "--concurrency-range": "1"}
    return command_lines.perf_line(line, "6.2", "section 6.2's batches", needs)


@pytest.mark.parametrize("batch", ["-b 16", "-b16", "-b 16.0", "-b 1 -b 16"])
def test_a_batch_written_as_perf_analyzer_reads_it(batch):
    line = LINE_61.replace("range 8", "range 1") + f" {batch}"
    assert batch16(line) == line


def test_a_batch_perf_analyzer_would_refuse_says_how_to_write_it():
    line = LINE_61.replace("range 8", "range 1")
    # perf_analyzer 2.51 stops on these: "unrecognized option '--batch-size'", "-b =16"
    for batch in ("--batch-size 16", "--batch-size=16"):
        assert sentence(lambda: batch16(f"{line} {batch}")) == (
            "6.2: perf_analyzer has no `--batch-size`: its flag is `-b`."
        )
    assert "reads `-b=16` as `-b` with the value `=16`: write `-b 16`" in sentence(
        lambda: batch16(f"{line} -b=16")
    )
    assert "your line makes every request 8 images, not the batch the step sends" in sentence(
        lambda: batch16(f"{line} -b 8")
    )
    assert "sends one image per request (perf_analyzer's default), not the batch" in sentence(
        lambda: batch16(line)
    )


@pytest.mark.parametrize(
    "rate",
    [
        "--request-rate-range 185",
        "--request-rate-range 185.0",  # the tester's
        "--request-rate-range 185.0:185.0",
        "--request-rate-range 185:185:1",
        "--request-rate-range=185.00",
        "--request-rate 185",  # getopt_long takes any start that names one flag
    ],
)
def test_a_rate_is_a_number(rate):
    line = LINE_66.replace("--request-rate-range 185", rate)
    assert evenly(line) == line


@pytest.mark.parametrize(
    "rate, said",
    [
        ("--request-rate-range 186", "offers 186 requests/s, not the rate the step offers"),
        ("--request-rate-range 185:370", "offers 185:370 requests/s, not the rate"),
        ("--request-rate-range 185:185:2", "offers 185:185:2 requests/s, not the rate"),
        ("--request-rate-range fast", "offers fast requests/s, not the rate"),
    ],
)
def test_another_rate_is_refused(rate, said):
    assert said in sentence(lambda: evenly(LINE_66.replace("--request-rate-range 185", rate)))


@pytest.mark.parametrize(
    "concurrency",
    [
        "--concurrency-range 8",
        "--concurrency-range 8:8",
        "--concurrency-range 8.0",
        "--concurrency 8",
        "--concurrency-range=8:8:1",
    ],
)
def test_a_concurrency_in_any_spelling(concurrency):
    assert c8(LINE_61.replace("--concurrency-range 8", concurrency))


@pytest.mark.parametrize(
    "words, said",
    [
        ("--concurrency-range 8 16", "`16` follows no flag: perf_analyzer would ignore it"),
        ("--c 8", "`--c` starts several flags (--collect-metrics, --concurrency-range)"),
        ("--max 3", "write the one you mean in full"),
        ("--concurrency-range 8 -q", "perf_analyzer has no flag `-q`"),
        ("--concurrency-range 8 --threads 2", "perf_analyzer has no flag `--threads`"),
        ("--concurrency-range 8 --url x", "perf_analyzer has no `--url`: its flag is `-u`"),
        ("--concurrency-range 8 --async=1", "`--async` takes no value"),
        ("--concurrency-range", "`--concurrency-range` takes the next word, `--input-data`, as"),
    ],
)
def test_what_perf_analyzer_would_refuse_or_ignore(words, said):
    line = LINE_61.replace("--concurrency-range 8", words)
    assert said in sentence(lambda: c8(line))


def test_a_flag_at_the_end_without_its_value():
    assert "`-m` needs a value after it" in sentence(lambda: c8(f"{LINE_61} -m"))


def config(text, **needs):
    return config_edits.config_fragment(text, "6.3", "the instances section 6.3 asks for", needs)


def test_config_fragment_goes_through_tritons_schema():
    text = "instance_group [ { count: 2, kind: KIND_GPU } ]"
    assert config(text, **{"instance_group.count": 2, "instance_group.kind": "KIND_GPU"}) == text
    misspelt = sentence(lambda: config(text.replace("count", "cont")))
    assert "is not config.pbtxt that Triton accepts" in misspelt and "cont" in misspelt
    said = sentence(
        lambda: config(
            text.replace("2", "1"), **{"instance_group.count": 2, "instance_group.kind": "KIND_GPU"}
        )
    )
    assert "has `instance_group.count: 1`, not what the step asks: section 6.3 says which" in said
    assert "2" not in said.replace("6.3", "")
    batching = "dynamic_batching { preferred_batch_size: [ 4, 6, 8 ] }"
    assert config(batching, **{"dynamic_batching.preferred_batch_size": [4, 6, 8]})
    assert "does not set everything the step asks" in sentence(
        lambda: config("max_batch_size: 8", max_batch_size=8, dynamic_batching=None)
    )


def test_a_fragment_sets_what_its_step_asks_and_nothing_else():
    """Issue 51's accepted-wrong 6.3d: all on GPU 0, and a `dynamic_batching { }` beside it, which
    the lab would apply (every later 6.3 run would batch): refused, as an edit of the file is."""
    needs = exercises.on_first_gpu(4, 2)
    right = "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]"
    assert config_edits.config_fragment(right, "6.3d", "6.3a's instances, unevenly", needs)
    for extra in ("dynamic_batching { }", "max_batch_size: 8", 'name: "other"'):
        said = sentence(
            lambda: config_edits.config_fragment(f"{right}\n{extra}", "6.3d", "x", needs)
        )
        assert (
            f"your fragment also sets `{extra.split()[0].rstrip(':')}`, which the step does not"
            in said
        )


def test_curl_line_asks_the_right_url_and_pipes_it():
    url = f"http://{HOST}/v2/models/food_classifier/stats"

    def curl(line):
        values = {"TRITON": f"http://{HOST}"}
        return command_lines.curl_line(line, "5.6", "Triton's statistics", url, values=values)

    good = f"curl -s {url} | python -m json.tool"
    assert curl(good) == good and curl(good.replace(" | ", "|"))
    assert curl(good.replace(f"http://{HOST}", HOST))  # curl takes host:port without http://
    assert "pipe curl's answer through `| python -m json.tool`" in sentence(
        lambda: curl(f"curl -s {url}")
    )
    assert "asks for `/v2/models/food_classifier`, not what the step reads: section 5.6" in (
        sentence(lambda: curl(good.replace("/stats", "")))
    )
    assert (
        "asks `http://localhost:8000`, which is not where this Jupyter reaches the service: "
        in (sentence(lambda: curl(good.replace(HOST, "localhost:8000"))))
    )


def test_results_and_functions():
    def check(value):
        return value["name"] == "food_classifier"

    answer = {"name": "food_classifier"}
    assert calls.result(answer, "5.3", what="the config", check=check) is answer
    assert "replace the `...` in the cell above with the call" in sentence(
        lambda: calls.result(..., "5.3", what="the config", check=check)
    )
    assert "your answer is {'name': 'x'}; name the model" in sentence(
        lambda: calls.result(
            {"name": "x"}, "5.3", what="the config", check=check, hint="name the model"
        )
    )

    def send_one(x):
        """Docstring."""
        ...

    def twice(x):
        return 2 * x

    def broken(x):
        return x / 0

    assert "with the body of send_one()" in sentence(
        lambda: calls.function(send_one, "4.4", what="time one request", args=(1,))
    )
    double = calls.function(twice, "4.4", what="double", args=(2,), check=lambda r: r == 4)
    assert double == 4
    assert re.search(
        r"broken\(\) stopped with ZeroDivisionError: .*fix it in the cell above",
        sentence(lambda: calls.function(broken, "4.4", what="divide", args=(1,))),
    )
    assert "twice() returned 4; a dict" in sentence(
        lambda: calls.function(
            twice, "4.4", what="x", args=(2,), check=lambda r: False, hint="a dict"
        )
    )


def test_an_edit_made_in_an_editor(tmp_path):
    path = tmp_path / "config.pbtxt"
    before = 'name: "m"\ninstance_group [ { count: 1, kind: KIND_CPU } ]\n'
    path.write_text(before)

    def edited():
        return config_edits.file_edit(path, before, "6.3", "x", {"instance_group.count": 2})

    assert "is unchanged: open it in JupyterLab's editor" in sentence(edited)
    path.write_text(before.replace("count: 1", "cont: 2"))
    assert "the file is not config.pbtxt that Triton accepts" in sentence(edited)
    path.write_text(before.replace("count: 1", "count: 2"))
    diff = edited()
    assert "-instance_group [ { count: 1" in diff and "+instance_group [ { count: 2" in diff


def test_perf_run_line_reads_the_spellings_the_check_accepts(monkeypatch, tmp_path):
    """What the check accepts, the lab runs as perf_analyzer reads it: the row's batch, the windows
    it adds only where the line sets none, and -v/--verbose-csv added once."""
    read = perf_runs.Line.read
    assert read("perf_analyzer -b16").value("-b") == "16"
    assert read("perf_analyzer --request-count=5").value("--request-count") == "5"
    assert read("perf_analyzer -p1000").value("--measurement-interval") == "1000"
    assert read("perf_analyzer --concurrency 8").value("--concurrency-range") == "8"
    ran = _nothing_runs(monkeypatch)
    perf_runs.run_line(f"perf_analyzer -m m -u {HOST} --concurrency-range=8 -p1000 -v", "x")
    assert "--measurement-interval" not in ran[-1]  # -p1000 is the line's window
    assert ran[-1].count("-v") == 1 and ran[-1].count("--verbose-csv") == 1
    perf_runs.run_line(f"perf_analyzer -m m -u {HOST} --async --request-rate-range=185.0", "y")
    assert ran[-1][ran[-1].index("--max-trials") + 1] == "3"  # a rate: three windows, any spread


def _nothing_runs(monkeypatch) -> list[list[str]]:
    """run_line with nothing run: each command it would run is kept, with an empty result."""
    ran = []
    monkeypatch.setattr(perf_runs.run, "_run", lambda name, cmd, *_: ran.append(cmd.argv))
    monkeypatch.setattr(
        perf_runs.run,
        "_with_triton_view",
        lambda *args: (args[4](), types.SimpleNamespace(extra={}))[1],
    )
    return ran


def test_a_line_is_read_once_from_its_check_to_its_runs(monkeypatch):
    """Issue 46: the checker reads the student's line once; the runs the lab makes of it (the same
    line, and with_load's other loads) read it no more: only a load's own words are read."""
    reads = []
    parse = perf_flags.parse
    monkeypatch.setattr(perf_flags, "parse", lambda words: reads.append(words) or parse(words))
    ran = _nothing_runs(monkeypatch)
    needs = {"-m": "m", "-u": HOST, "--concurrency-range": "8", "-b": "16"}
    line = perf(f"perf_analyzer -m m -u {HOST} --concurrency-range 8 -b16", **needs)
    assert isinstance(line, perf_runs.Line) and isinstance(line, str) and len(reads) == 1
    perf_runs.run_line(line, "6.1 c8")
    c16 = perf_runs.with_load(line, "--concurrency-range 16")
    perf_runs.run_line(c16, "6.1 c16")
    assert reads[1:] == [["--concurrency-range", "16"]]  # the load, not the line
    assert ran[-1][:6] == [ran[-1][0], "-m", "m", "-u", HOST, "-b16"]
    assert c16.value("-b") == "16" and c16.value("--concurrency-range") == "16"


# ---------------------------------------------------------------- instances per GPU

SEED_TWO_GROUPS = (  # the tester's: a group per GPU
    "instance_group [ {count: 4, kind: KIND_GPU, gpus: [0]}, "
    "{count: 4, kind: KIND_GPU, gpus: [1]} ]"
)
FOUR_AND_EIGHT = SEED_TWO_GROUPS.replace(
    "count: 4, kind: KIND_GPU, gpus: [1]", "count: 8, kind: KIND_GPU, gpus: [1]"
)
NO_GPUS_LIST = "instance_group [ { count: 4, kind: KIND_GPU } ]"  # every GPU the server sees
LISTED = "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0, 1 ] } ]"


def four_per_gpu(text, n_gpus=2):
    needs = exercises.on_every_gpu(4, n_gpus)
    return config_edits.config_fragment(text, "6.3", "four instances on every GPU", needs)


@pytest.mark.parametrize(
    "text",
    [
        LISTED,
        SEED_TWO_GROUPS,
        NO_GPUS_LIST,  # notebook 6: "Leave `gpus` out and Triton uses every GPU it sees"
        # 2 on each listed GPU, and 2 more on every GPU: 4 on each
        "instance_group [ { count: 2, gpus: [ 0, 1 ] }, { count: 2, kind: KIND_GPU } ]",
        "instance_group [ { count: 4, kind: KIND_AUTO } ]",  # KIND_AUTO is KIND_GPU on a GPU
        "instance_group [ { count: 4, gpus: [ 0, 1 ] } ]",  # no kind: KIND_AUTO, as above
    ],
)
def test_four_per_gpu_in_any_spelling(text):
    assert four_per_gpu(text) == text


@pytest.mark.parametrize(
    "text, said",
    [
        (FOUR_AND_EIGHT, "puts 4 on GPU 0 and 8 on GPU 1, not where the step puts them"),
        (LISTED.replace("[ 0, 1 ]", "[ 0 ]"), "puts 4 on GPU 0, not where the step puts them"),
        (LISTED.replace("count: 4", "count: 2"), "puts 2 on GPU 0 and 2 on GPU 1, not where"),
        (SEED_TWO_GROUPS.replace("gpus: [1]", "gpus: [0]"), "puts 8 on GPU 0, not where"),
        ("instance_group [ { count: 4, kind: KIND_CPU } ]", "puts 4 on the CPU, not where"),
        (
            LISTED.replace("[ 0, 1 ]", "[ 0, 1, 2 ]"),
            "would not load in Triton: the group lists GPU 2",
        ),
        ("max_batch_size: 8", "your fragment also sets `max_batch_size`"),
    ],
)
def test_not_four_per_gpu_is_refused_saying_where_they_go(text, said):
    got = sentence(lambda: four_per_gpu(text))
    assert got.startswith("6.3: your fragment ") and said in got, got


def test_instances_on_one_gpu_and_without_a_gpu():
    assert four_per_gpu(NO_GPUS_LIST, n_gpus=1) and four_per_gpu(LISTED.replace(", 1", ""), 1)
    assert "lists GPU 1, but the server has 1 GPU" in sentence(lambda: four_per_gpu(LISTED, 1))
    # no GPU: the lab writes KIND_GPU as KIND_CPU, without gpus, so the counts add up on the CPU
    assert four_per_gpu(LISTED, n_gpus=0) and four_per_gpu(NO_GPUS_LIST, n_gpus=0)
    assert "puts 8 on the CPU, not where the step puts them: section 6.3 says where" in sentence(
        lambda: four_per_gpu(SEED_TWO_GROUPS, n_gpus=0)
    )


def test_one_instance_on_the_first_gpu():
    def first_gpu(text, n_gpus):
        needs = exercises.on_first_gpu(1, n_gpus)
        return config_edits.config_fragment(text, "6.6", "one instance on GPU 0", needs)

    on_0 = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"
    bare = "instance_group [ { count: 1, kind: KIND_GPU } ]"
    assert first_gpu(on_0, 2) and first_gpu(on_0, 1) and first_gpu(bare, 1) and first_gpu(on_0, 0)
    assert "puts 1 on GPU 0 and 1 on GPU 1, not where the step puts them" in sentence(
        lambda: first_gpu(bare, 2)
    )
    assert "puts 1 on GPU 1, not where the step puts them" in sentence(
        lambda: first_gpu(on_0.replace("[ 0 ]", "[ 1 ]"), 2)
    )


def test_an_edit_in_an_editor_is_judged_by_instances_per_gpu_too(tmp_path):
    path = tmp_path / "config.pbtxt"
    before = 'name: "m"\ninstance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]\n'

    def edited(text):
        path.write_text(text)
        needs = exercises.on_every_gpu(2, 2)
        return config_edits.file_edit(path, before, "6.3", "two on every GPU", needs)

    assert edited('name: "m"\ninstance_group [ { count: 2, kind: KIND_GPU } ]\n')
    assert "the file puts 2 on GPU 0, not where the step puts them" in sentence(
        lambda: edited(before.replace("count: 1", "count: 2"))
    )


# ---------------------------------------------------------------- 4.4: a request, timed


class FakeSession:
    """A session whose request takes `seconds` and whose server says it spent `server` ms."""

    def __init__(self, seconds=0.03, server="decode;dur=4.000, queue;dur=0.010, infer;dur=20.0"):
        self.seconds, self.server, self.status = seconds, server, 200

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def post(self, url, json=None, timeout=None):
        time.sleep(self.seconds)
        headers = {"Server-Timing": self.server} if self.server else {}
        return types.SimpleNamespace(status_code=self.status, headers=headers)


@pytest.fixture
def session(monkeypatch):
    """4.4's check sends through a requests.Session of its own: here a FakeSession."""
    fake = FakeSession()
    monkeypatch.setattr(step_needs.requests, "Session", lambda: fake)
    exercises.given(FASTAPI="http://127.0.0.1:9")
    return fake


def timed(unit: float = 1000, start=time.perf_counter, after_the_answer=False):
    """The step 4.4 on a send_one that writes its latency with `unit` (1000: ms, right; 1:
    seconds, wrong), reads its start with `start`, or after the answer came back."""

    def send_one(session, url, payload):
        """Docstring."""
        t_start, t0 = start(), time.perf_counter()
        resp = session.post(url, json=payload, timeout=60)
        latency_ms = (time.perf_counter() - t0) * unit
        if after_the_answer:  # the tester's: t_start read once the answer is back
            t_start = time.perf_counter()
        return {
            "t_start": t_start,
            "latency_ms": latency_ms,
            "status": resp.status_code,
            "server_timing": resp.headers.get("Server-Timing"),
        }

    return exercises.function(send_one, "4.4", {})


def test_a_latency_in_milliseconds_against_the_servers_own_time(session):
    record = timed()
    assert 24 <= record["latency_ms"] < 1000 and record["status"] == 200


@pytest.mark.parametrize(
    "unit, said",
    [
        (
            1,
            "is less than the server's own time for the request (24.01 ms in its Server-Timing): "
            "the unit looks wrong, latency_ms is in milliseconds and time.perf_counter() counts "
            "seconds.",
        ),
        (
            1e6,
            "is over 20 times the server's own time for the request (24.01 ms in its "
            "Server-Timing): the unit looks wrong, it is in milliseconds.",
        ),
    ],
)
def test_a_latency_in_another_unit_is_refused(session, unit, said):
    got = sentence(lambda: timed(unit))
    assert got.startswith(
        "4.4: send one request, time it, collect its status and Server-Timing: "
        "send_one() returned {"
    )
    assert got.endswith(said), got


def test_a_start_taken_after_the_answer_is_refused(session):
    """Issue 42's probe: t_start read once the answer came back, the latency itself right."""
    got = sentence(lambda: timed(after_the_answer=True))
    assert "t_start was read after the answer came back; read it just before session.post" in got


def test_a_record_that_is_not_what_its_docstring_says(session):
    session.status = 500
    assert "the status is 500, the service answers a good request 200" in sentence(timed)
    session.status, session.server = 200, None
    assert "server_timing is not the Server-Timing header" in sentence(timed)
    session.server = FakeSession().server
    assert "t_start is not the time.perf_counter() reading" in sentence(
        lambda: timed(start=time.time)
    )
    assert "it has no latency_ms, status: return the four keys of its docstring" in sentence(
        lambda: calls.function(
            lambda: {"t_start": 1.0, "server_timing": "infer;dur=1"},
            "4.4",
            what="time one request",
            check=exercises.timed_request,
        )
    )


# ---------------------------------------------------------------- issue 42's probes, step by step
# Each check cell names its step only (servelab/exercises/steps.py holds what it needs): right
# answers in every spelling the tool accepts pass, wrong ones are refused in the student's terms.


@pytest.fixture
def class_node():
    """The values notebook 6 hands its checks on the class's node (exercises.given)."""
    exercises.given(
        HOST=HOST,
        TRITON=f"http://{HOST}",
        PERF_INPUT="in.json",
        N_GPUS=2,
        RATE=185,
        RATES=[185, 308, 431],
        MODEL="food_classifier_tuned",
        GRPC_HOST="127.0.0.1:8001",
        CLIENTS=128,
    )


def test_a_protocol_in_capitals_is_the_same_protocol(class_node):
    """perf_analyzer lowers -i's value (ParseProtocol): `-i HTTP` is its default, `-i GRPC` gRPC."""
    assert exercises.perf_line(LINE_61 + " -i HTTP", "6.1b")
    assert exercises.perf_line(LINE_61 + " -i Http", "6.1b")
    grpc = (
        "perf_analyzer -m food_classifier_tuned -u 127.0.0.1:8001 -i GRPC --concurrency-range 128 "
        "--async --shape input:224,224,3"
    )
    assert exercises.perf_line(grpc, "7.4a")
    assert "leave `-i grpc` out of your line: it sets the protocol" in sentence(
        lambda: exercises.perf_line(LINE_61 + " -i grpc", "6.1b")
    )


@pytest.mark.parametrize(
    "options",
    [
        "-s -H 'Accept: application/json'",  # the tester's
        "-s -H 'Accept: application/json' -H 'X-Other: 1'",
        "-sH 'Accept: application/json'",
        "-s --header 'Accept: application/json'",
        "-s -X GET",
        "-s --max-time 5 -A lab",
    ],
)
def test_curl_options_with_values_are_not_the_url(class_node, options):
    url = f"http://{HOST}/v2/models/food_classifier/versions/1/stats"
    for line in (
        f"curl {options} {url} | python -m json.tool",
        f"curl {url} {options} | python3 -m json.tool",
        f"curl {options} --url {url} | python -m json.tool",
    ):
        assert exercises.curl_line(line, "6.1d") == line


def test_curl_lines_that_ask_otherwise_are_refused(class_node):
    url = f"http://{HOST}/v2/models/food_classifier/versions/1/stats"
    assert "is read with GET; leave `-X POST` out" in sentence(
        lambda: exercises.curl_line(f"curl -X POST {url} | python -m json.tool", "6.1d")
    )
    assert "`-d` makes curl send a body with POST" in sentence(
        lambda: exercises.curl_line(f"curl -d x {url} | python -m json.tool", "6.1d")
    )
    assert "your curl line names no URL" in sentence(
        lambda: exercises.curl_line("curl -H 'Accept: x/y' | python -m json.tool", "6.1d")
    )
    assert "asks for `/v2/models/food_classifier/stats`, not what the step reads" in sentence(
        lambda: exercises.curl_line(
            f"curl -s http://{HOST}/v2/models/food_classifier/stats | python -m json.tool", "6.1d"
        )
    )


BATCHING = "dynamic_batching { preferred_batch_size: [ %s ] max_queue_delay_microseconds: 100 }"
ONNX_CONFIG = (
    'name: "food_classifier_onnx"\nbackend: "onnxruntime"\nmax_batch_size: 16\n'
    "instance_group [\n  {\n    count: 1\n    kind: KIND_GPU\n    gpus: [ 0 ]\n  }\n]\n"
)


@pytest.mark.parametrize("sizes", ["4, 6, 8", "8, 6, 4", "6, 4, 8", "4, 6, 8, 8"])
def test_preferred_batch_sizes_are_a_set(tmp_path, class_node, sizes):
    """Triton keeps preferred_batch_size as a set: [8, 6, 4] is what the step asks."""
    path = tmp_path / "config.pbtxt"
    path.write_text(f"{ONNX_CONFIG}\n{BATCHING % sizes}\n")
    assert "+dynamic_batching" in exercises.file_edit(path, ONNX_CONFIG, "6.6e")


def test_preferred_batch_sizes_other_than_the_steps_are_refused(tmp_path, class_node):
    path = tmp_path / "config.pbtxt"
    path.write_text(f"{ONNX_CONFIG}\n{BATCHING % '4, 8'}\n")
    assert "has `dynamic_batching.preferred_batch_size: [ 4, 8 ]`, not" in sentence(
        lambda: exercises.file_edit(path, ONNX_CONFIG, "6.6e")
    )


def test_an_edit_that_changes_more_than_the_step_asked_is_refused_with_its_lines(
    tmp_path, class_node
):
    """The tester's: 6.6e's block, and `count: 2` too (6.6's one-instance runs would use two)."""
    path = tmp_path / "config.pbtxt"
    path.write_text(ONNX_CONFIG.replace("count: 1", "count: 2") + f"\n{BATCHING % '4, 6, 8'}\n")
    said = sentence(lambda: exercises.file_edit(path, ONNX_CONFIG, "6.6e"))
    assert said == (
        "6.6e: your edit also changes instance_group.count (`- count: 1`; `+ count: 2`): the step "
        "asks for nothing else, so put the rest back as it was."
    )
    # a field the step's block does not ask for, inside the block
    path.write_text(f"{ONNX_CONFIG}\n{BATCHING % '4, 6, 8'}"[:-2] + " preserve_ordering: true }\n")
    assert "your edit also changes dynamic_batching.preserve_ordering" in sentence(
        lambda: exercises.file_edit(path, ONNX_CONFIG, "6.6e")
    )
    # comments and layout are not fields: only the block changed
    path.write_text(f"# mine\n{ONNX_CONFIG}\n{BATCHING % '4, 6, 8'}\n".replace("  ", "    "))
    assert exercises.file_edit(path, ONNX_CONFIG, "6.6e")


def test_an_instance_edit_changes_the_instances_only(tmp_path, class_node):
    path = tmp_path / "config.pbtxt"
    path.write_text(
        ONNX_CONFIG.replace("gpus: [ 0 ]", "gpus: [ 0, 1 ]").replace("count: 1", "count: 2")
    )
    assert exercises.file_edit(path, ONNX_CONFIG, "6.4b")
    path.write_text(
        ONNX_CONFIG.replace("gpus: [ 0 ]", "gpus: [ 0, 1 ]")
        .replace("count: 1", "count: 2")
        .replace("max_batch_size: 16", "max_batch_size: 8")
    )
    assert (
        "your edit also changes max_batch_size (`- max_batch_size: 16`; `+ max_batch_size: 8`)"
        in (sentence(lambda: exercises.file_edit(path, ONNX_CONFIG, "6.4b")))
    )


def test_a_check_cell_names_its_step_only_and_the_step_knows_its_needs(class_node):
    """The check cell passes the answer and the step; the module reads the step's needs with the
    notebook's values: 6.6c's rate is RATE as the notebook handed it over."""
    line = (
        f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
        "--request-rate-range 185 --request-distribution constant"
    )
    assert exercises.perf_line(line, "6.6c") == line
    exercises.given(RATE=200)
    said = sentence(lambda: exercises.perf_line(line, "6.6c"))
    assert "your line offers 185 requests/s, not the rate the step offers" in said
    assert "200" not in said
    with pytest.raises(KeyError, match="no Perf step named '6.9z'"):
        exercises.perf_line(line, "6.9z")
