"""HTTP load for the FastAPI and Ray Serve notebooks (introduced in notebook 4).

    df = loadgen.run(url, payload, n=100, concurrency=16, send=send_one)   # a closed loop
    loadgen.summarize(df)     # one row: median, p95, p99, throughput, and the two laws
    loadgen.median_ms(df)     # the median latency with its 95% bootstrap interval
    df = open_loop.run(url, body, rate=40, seconds=10)   # from servelab.loadgen import open_loop

Its files:

    closed_loop.py  N requests from C senders, each sent again once answered (notebook 4)
    open_loop.py    requests at a rate whatever the answers, and a run cut into windows (notebook 9)
    summary.py      a run's rows read: the summary row with the laws, medians and throughputs with
                    their intervals
    saved.py        a run as plain files in the results bundle, and back (the review pass)
    spread.py       an open loop sent from several processes at once, for rates one Python
                    process cannot send (notebook 9's optional three-way comparison)
"""

from servelab.loadgen.closed_loop import post_once, run
from servelab.loadgen.summary import median_ms, summarize, throughput

__all__ = ["median_ms", "post_once", "run", "summarize", "throughput"]
