"""servelab: the small library the lab's notebooks import. Open any module: each is at most 300
lines (tests/test_size_budget.py keeps it so) and says which notebook introduces it.

    notebook 3   labenv            service URLs from the environment, Triton's normalised once
                 exercises         checks what you write in an exercise (configs, calls, functions)
                 answers           an answer as every check reads it: blank or written
                 command_lines     checks of the curl and perf_analyzer lines you type
    notebook 4   food11            the model's classes, pre- and post-processing (every service)
                 image_decode      an upload opened within the decode budget (food11 uses it)
                 loadgen           HTTP load: sequential, N in flight, or open loop
                 queueing          the utilisation and Little's laws (one laws()), a queueing model
                 claims            checks a "what to notice" claim on your own numbers
                 judgement         your explanation before the verdict; decisions from your numbers
                 step_needs        what a step needs beyond an answer's form (units, instances)
                 services          switching the lab's services from a notebook while they run
                 plots             the lab's figures
    notebook 5   model_repository  copies the staged models into Triton's model repository
    notebook 6   perf              perf_analyzer: your line run, its parsed row with the laws
                 perf_flags        a perf_analyzer line read as perf_analyzer reads it
                 perf_command      the command the lab runs for your line, its secret kept off it
                 perf_output       perf_analyzer's CSV rows and windows read
                 step_table        a step's runs as rows, the queueing model beside them
                 triton_config     edit a model's config.pbtxt and reload it while Triton runs
                 config_text       config.pbtxt as text: fields found, read and replaced
                 instances         where Triton puts a model's instances, the fragment to change it
                 triton_stats      Triton's view of itself: statistics, metrics parser, one sampler
                 gpu_names         each GPU by one number: gpus: [ i ], nvidia-smi and nvtop agree
                 gpus              where each instance runs on the GPUs, checked against its config
                 gpu_scaling       the laws per GPU, and what a second GPU buys
                 live_metrics      the sampler's metrics plotted while a load runs
                 triton_checks     notebook 6's verdicts on your runs
    notebook 7   hardware          the limit per runtime, served/limit per run
    notebook 8   ensemble          pre-processing on the server: the preprocess + ONNX ensemble
                 ensemble_checks   notebook 8's verdicts on your mapping and runs
                 model_analyzer    Model Analyzer's results read: table, best per objective, Pareto
    notebook 9   ray_serving       Ray Serve: the cluster, the deployment, its replicas watched
                 serve_options     a deployment's options read as Ray reads them (its exercises)
                 open_loop         HTTP load at a rate whatever the answers, and its windows in time
                 ray_checks        notebook 9's verdicts on your runs
    (all)        paths             where things live in the repository
                 tools             where perf_analyzer is, and the environment it needs
                 decode_budget     what decoding one image may cost, each limit with its reason

servelab.serving runs inside the services and Triton's models (notebook 7 imports its raw_limit
to time the model alone). What runs
the lab lives outside this package, in top-level folders named after what they are: labstack/
(`make up`, `make artifacts`, `make lab`), reliability/ (`make reliability`) and gpu_reference/
(the maintainers' GPU reference run). Layers import downward only: pyproject.toml's
[tool.importlinter] contracts say how, and `make test` checks them.
"""
