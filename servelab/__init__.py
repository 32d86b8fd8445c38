"""servelab: the small library the lab's notebooks import. Open any module: each is short and
says which notebook introduces it.

    notebook 3   labenv            service URLs from the environment; the host steps of Docker mode
                 exercises         checks what you write in an exercise, in your terms
    notebook 4   food11            the model's classes, pre- and post-processing (every service)
                 loadgen           a load generator for HTTP services (sequential or N in flight)
                 step_needs        what a step needs beyond an answer's form (units, instances)
                 claims            checks a "what to notice" claim on your own numbers
                 plots             the lab's figures
                 queueing          a queueing model beside the measurements
    notebook 5   model_repository  copies the staged models into Triton's model repository
    notebook 6   perf              perf_analyzer: the command, its run, its parsed row
                 perf_flags        a perf_analyzer line read as perf_analyzer reads it
                 triton_config     edit a model's config.pbtxt and reload it while Triton runs
                 triton_stats      Triton's per-batch-size statistics and utilisation metrics
    (all)        paths             where things live in the repository
                 tools             where perf_analyzer is, and the environment it needs
    notebook 8   ensemble          pre-processing on the server: the preprocess + ONNX ensemble
                 live_metrics      Triton's Prometheus metrics sampled and plotted while a load runs
                 model_analyzer    Model Analyzer's results read: table, best per objective, Pareto
    notebook 9   ray_serving       Ray Serve: the cluster, the deployment, its replicas watched
                 serve_options     a deployment's options read as Ray reads them (its exercises)

servelab.serving runs inside the services and Triton's models (no notebook imports it). What runs
the lab lives outside this package, in top-level folders named after what they are: labstack/
(`make up`, `make artifacts`, `make lab`), reliability/ (`make reliability`) and gpu_reference/
(the maintainers' GPU reference run). Layers import downward only: pyproject.toml's
[tool.importlinter] contracts say how, and `make test` checks them.
"""
