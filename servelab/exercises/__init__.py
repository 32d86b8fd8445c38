"""What you write, checked in your terms before anything long runs (introduced in notebook 3).

An exercise cell holds a blank, `...`, that you replace with your answer; the cell after it hands
your answer to one of these checks. A check returns your answer when it does what the step
needs, so the next cell can use it. Otherwise it stops the notebook with one sentence that says
what to write and where to look (a NotYet, which Jupyter shows without a traceback):

    line = exercises.perf_line(line, "6.1", "the step measures 8 requests in flight",
                               needs={"-m": "food_classifier", "--concurrency-range": "8"})
    line = exercises.curl_line(line, "5.3", "Triton's statistics of food_classifier",
                               url=f"{TRITON}/v2/models/food_classifier/stats")
    text = exercises.config_fragment(text, "7.6", "two instances on every GPU",
                                     needs=exercises.on_every_gpu(2, N_GPUS))
    diff = exercises.file_edit(path, before, "6.3", "set count: 2", needs={...})
    config = exercises.result(config, "5.1", "the config Triton serves", check=..., hint="...")
    record = exercises.function(send_one, "4.4", "time one request", args=(...),
                                check=exercises.timed_request)
    deployment = exercises.deployment_options(deployment, "9.2", "two replicas", FoodClassifier,
                                              needs={"num_replicas": 2})
    with judgement.verdict_after(answer_45, "4.5"): ...  # from servelab.exercises import judgement

Every check has the same shape: your answer, the step, what the step needs in words, then what
exactly to look for.

    answers.py        an answer as every check reads it (blank or written), and NotYet
    command_lines.py  a perf_analyzer line (read once: perf.Line) and a curl line
    config_edits.py   a config.pbtxt fragment, or your edit of the file, by Triton's own schema
    calls.py          what a call or a function you wrote returns
    deployment.py     a Ray Serve deployment's options, read by Ray itself
    step_mapping.py   an ensemble's step mapping (notebook 8), as Triton would read it
    step_needs.py     what a step needs beyond an answer's form: a latency in ms, instances per GPU
    judgement.py      your explanation before the verdict; decisions judged on your own numbers
"""

from servelab.exercises.answers import NotYet, blank
from servelab.exercises.calls import function, result
from servelab.exercises.command_lines import curl_line, perf_line
from servelab.exercises.config_edits import config_fragment, file_edit
from servelab.exercises.deployment import deployment_options
from servelab.exercises.step_mapping import step_mapping
from servelab.exercises.step_needs import (
    Instances,
    Wrong,
    on_every_gpu,
    on_first_gpu,
    timed_request,
)

__all__ = [
    "Instances",
    "NotYet",
    "Wrong",
    "blank",
    "config_fragment",
    "curl_line",
    "deployment_options",
    "file_edit",
    "function",
    "on_every_gpu",
    "on_first_gpu",
    "perf_line",
    "result",
    "step_mapping",
    "timed_request",
]
