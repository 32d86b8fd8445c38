"""perf_analyzer, as the Triton notebooks use it (introduced in notebook 6).

    from servelab import perf
    line = exercises.perf_line(...)           # your line, checked and read once: a perf.Line
    c8 = perf.run_line(line, "6.1 c8")        # a perf.Run: row, throughput, windows, stats
    c16 = perf.run_line(perf.with_load(line, "--concurrency-range 16"), "6.1 c16")

Its files:

    line.py        a perf_analyzer line read once (perf.Line): the checker, the runner, the laws
                   and the verdicts share it; with_load() makes the same line at another load
    flags.py       its flags read as perf_analyzer's getopt_long reads them, what each changes
    command.py     the command the lab runs for your line, its secret kept off what is shown
    output.py      perf_analyzer's CSV rows, its measurement windows, its failures explained
    run.py         run_line(): the line run, Triton's view around it, a perf.Run with the laws
    result.py      a run as the notebook holds it (perf.Run): its row, throughput, windows
    saved.py       a run as plain files in the results bundle, and back (the review pass)
    step_table.py  a step's runs as rows, the queueing model beside them
    tool.py        where perf_analyzer is, and the environment it starts with
"""

from servelab.perf.line import Line
from servelab.perf.result import Run
from servelab.perf.run import PerfAnalyzerError, run_line, with_load

__all__ = ["Line", "PerfAnalyzerError", "Run", "run_line", "with_load"]
