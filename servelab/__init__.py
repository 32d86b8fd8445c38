"""servelab: the small library the lab's notebooks import, one idea per file, grouped by idea.

Each entry says which notebook introduces it; a package (name/) lists its own files in its
__init__.py. README.md's table of the notebooks names the same entries (tests keep them so).

    notebook 3   passes/          prepare, measure, review: which cells run, the results bundle
                 labenv           service URLs from the environment, Triton's written out once
                 exercises/       checks of what you write: lines, configs, calls; your judgement
    notebook 4   food11           the model's classes, pre- and post-processing (every service)
                 image_decode     an upload opened within the decode budget (food11 uses it)
                 loadgen/         HTTP load: a closed loop, an open loop, a run's rows read
                 queueing         the utilisation and Little's laws (one laws()), a queueing model
                 claims           predictions, and "what to notice" claims judged on your numbers
                 services         switching the lab's services from a notebook while they run
                 plots            the lab's figures
                 verdicts/        each notebook's claims judged on the runs it hands over
    notebook 5   triton/          Triton from a notebook: its repository, configs, statistics
    notebook 6   perf/            perf_analyzer: your line read once, run, its row with the laws
    notebook 7   hardware         the limit per runtime, served/limit per run
    notebook 8   ensemble         pre-processing on the server: the preprocess + ONNX ensemble
                 model_analyzer   Model Analyzer's results read: table, best per objective, Pareto
    notebook 9   ray_serving      Ray Serve: the cluster, the deployment, its replicas watched
                 serve_options    a deployment's options read as Ray reads them (its exercises)
                 three_way        Triton, Ray Serve and FastAPI: same model, same load (9.6)
    (all)        paths            where things live in the repository
                 decode_budget    what decoding one image may cost, each limit with its reason
                 decode_pool      decoding in worker processes whose CPU time the kernel bounds
                 serving/         what runs inside the services and Triton's models

What runs the lab lives outside this package, in top-level folders named after their readers:
labstack/ (`make up`, `make artifacts`, `make lab`) and maintainers/, the maintainers' wing (the
reference runs, `make reliability`, `make timing`, `make figures`). Layers import downward only:
pyproject.toml's [tool.importlinter] contracts say how, and `make test` checks them.
"""
