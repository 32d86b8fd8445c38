"""What you write, checked in your terms before anything long runs (introduced in notebook 3).

An exercise cell holds a blank, `...`, that you replace with your answer; the cell after it hands
your answer to the table of steps, naming the step and nothing else. The table (steps.py) finds
the step and calls the check of its kind with what the step needs. A check returns your answer
when it does what the step needs, so the next cell can use it. Otherwise it stops the notebook
with one sentence that says what your answer does against what the step asks, and where to look
(a NotYet, which Jupyter shows without a traceback); it never hands over the step's value:

    exercises.given(HOST=HOST, PERF_INPUT=PERF_INPUT)   # the values the steps are written with
    line = exercises.perf_line(line, "6.1b")            # a perf_analyzer line
    line = exercises.curl_line(line, "5.3")             # a curl line
    text = exercises.config_fragment(text, "6.3d")      # a config.pbtxt fragment
    diff = exercises.file_edit(path, before, "6.3a")    # your edit of the file, in an editor
    config = exercises.result(config, "5.1")            # what a call you wrote returned
    answer = exercises.function(classify, "5.2", photo) # a function whose body you wrote
    deploy = judgement.decide("6.3g", deploy, why_63g, per_device, OBJECTIVE_MS)
    deployment = exercises.deployment_options(deployment, "9.2", "two replicas", FoodClassifier,
                                              needs={"num_replicas": 2})

    steps.py          the table: each step of notebooks 3 to 8, and the check it calls
    answer_key.py     what each step's answer sets (plain here; sealed in the class edition)
    key.py            how an answer is compared with its step's needs, plain or sealed
    given.py          the notebook's values the needs are written with
    answers.py        an answer as every check reads it (blank or written), and NotYet
    command_lines.py  a perf_analyzer line (read once: perf.Line) and a curl line
    config_edits.py   a config.pbtxt fragment, or your edit of the file, by Triton's own schema
    calls.py          what a call or a function you wrote returns
    judgement.py      your explanation before the verdict; your decisions, to their judges
    judges.py         how a decision is judged on your own numbers
    step_needs.py     what a step needs beyond an answer's form: a latency in ms, what the server
                      answers, instances per GPU
    deployment.py     a Ray Serve deployment's options, read by Ray itself (notebook 9)
    step_mapping.py   an ensemble's step mapping (notebook 8), as Triton would read it

The checks never import the table: it sits above them (a test keeps the package free of import
circles, counting imports inside functions).
"""

from servelab.exercises.answers import NotYet, blank
from servelab.exercises.deployment import deployment_options
from servelab.exercises.step_mapping import step_mapping
from servelab.exercises.step_needs import (
    Instances,
    Wrong,
    on_every_gpu,
    on_first_gpu,
    timed_request,
)
from servelab.exercises.steps import (
    config_fragment,
    curl_line,
    file_edit,
    function,
    given,
    perf_line,
    result,
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
    "given",
    "on_every_gpu",
    "on_first_gpu",
    "perf_line",
    "result",
    "step_mapping",
    "timed_request",
]
