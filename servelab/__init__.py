"""servelab: the small library the lab's notebooks import. Open any module: each is short and
says which notebook introduces it.

    notebook 3   labenv            service URLs from the environment; the host steps of Docker mode
    notebook 4   food11            the model's classes, pre- and post-processing (every service uses it)
                 loadgen           a Python load generator for HTTP services (sequential or N in flight)
                 claims            checks a "what to notice" claim on your own numbers
                 plots             the lab's figures
                 queueing          a queueing model beside the measurements
    notebook 5   model_repository  copies the staged models into Triton's model repository
    notebook 6   perf              perf_analyzer: the command, its run, its parsed row
                 triton_config     validate, diff, write and reload a model's config.pbtxt
                 triton_stats      Triton's per-batch-size statistics and utilisation metrics
    (all)        paths             where things live in the repository
    (issue 26, not in a notebook yet)
                 ensemble          the preprocess + ONNX ensemble: place, load, classify, per-step statistics
                 model_analyzer    Triton Model Analyzer in local launch mode, its results parsed
                 live_metrics      Triton's Prometheus metrics sampled and plotted while a load runs

What the notebooks do not import lives in sub-packages named after what they are:
servelab.serving (runs inside the services and Triton's models), servelab.stack (runs the lab:
`make up`, `make artifacts`, `make lab`) and servelab.reliability (`make reliability`).
"""
