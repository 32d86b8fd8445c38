"""What you write, checked in your terms before anything long runs (introduced in notebook 3).

An exercise cell holds a blank, `...`, that you replace with your answer; the cell after it hands
your answer to one of these checks, naming the step and nothing else: what each step needs (the
expected flags, fields, URLs) lives in one module, steps.py, as the answer key lives in docs/. A
check returns your answer when it does what the step needs, so the next cell can use it.
Otherwise it stops the notebook with one sentence that says what to write and where to look (a
NotYet, which Jupyter shows without a traceback):

    exercises.given(HOST=HOST, PERF_INPUT=PERF_INPUT)   # the values the steps are written with
    line = exercises.perf_line(line, "6.1b")            # a perf_analyzer line
    line = exercises.curl_line(line, "5.3")             # a curl line
    text = exercises.config_fragment(text, "6.3d")      # a config.pbtxt fragment
    diff = exercises.file_edit(path, before, "6.3a")    # your edit of the file, in an editor
    config = exercises.result(config, "5.1")            # what a call you wrote returned
    answer = exercises.function(classify, "5.2", photo) # a function whose body you wrote
    deployment = exercises.deployment_options(deployment, "9.2", "two replicas", FoodClassifier,
                                              needs={"num_replicas": 2})
    deploy = judgement.decide("6.3g", deploy, why_63g, per_device, OBJECTIVE_MS)

    answers.py        an answer as every check reads it (blank or written), and NotYet
    steps.py          what each step of notebooks 3 to 7 needs: the expected answers
    command_lines.py  a perf_analyzer line (read once: perf.Line) and a curl line
    config_edits.py   a config.pbtxt fragment, or your edit of the file, by Triton's own schema
    calls.py          what a call or a function you wrote returns
    deployment.py     a Ray Serve deployment's options, read by Ray itself
    step_mapping.py   an ensemble's step mapping (notebook 8), as Triton would read it
    step_needs.py     what a step needs beyond an answer's form: a latency in ms, what the server
                      answers, instances per GPU
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
from servelab.exercises.steps import given

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
    "given",
    "on_every_gpu",
    "on_first_gpu",
    "perf_line",
    "result",
    "step_mapping",
    "timed_request",
]
