"""Ray Serve from a notebook: the cluster, the food classifier deployed on it, its replicas watched
while a load runs, and the numbers notebook 9 reads from each run.

Introduced in notebook 9.

    url = ray_serving.connect()             # ray.init + serve.start: the proxy on the head node
    ray_serving.deploy(FoodClassifier.options(num_replicas=2, max_ongoing_requests=1))
    ray_serving.placement()                 # which node runs each replica (Ray's state API)
    with ray_serving.Replicas() as watch:   # serve.status() sampled while a load runs
        df = open_loop.run(url, ray_serving.image_body(), phases=[...])
    ray_serving.kill_replica()              # ray.kill: a replica crashes, Serve replaces it

Everything here asks Ray: placement from its state API, replica counts from serve.status(), a
crash with ray.kill. The deployment itself (what runs in each replica) is
servelab/serving/ray_app.py. The cluster's address and the proxy's port come from the environment
(RAY_ADDRESS, RAY_SERVE_URL: .lab/urls.env in local mode, set by hand on Chameleon), and so does
the way to its token (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH: the file Ray reads it from; on
Chameleon, the lab's .lab/ray_token that notebook 2 makes on both nodes).
"""

from __future__ import annotations

import os
import threading
import time
import warnings

import numpy as np
import pandas as pd

from servelab import labenv, loadgen, queueing
from servelab.paths import LAB_DIR
from servelab.serving import ray_loopback
from servelab.serving.ray_app import IMAGE_BYTES, IMAGE_SHAPE, FoodClassifier  # noqa: F401

APP, ROUTE = "food", "/food"
REQUEST_TIMEOUT_S = 30.0  # Ray's proxy answers 408 after this: no request hangs
# How fast Ray's autoscaler looks: a lab's load step lasts seconds, not Ray's 30 s look-back.
# (Ray 2.60 takes the push interval from RAY_SERVE_*_AUTOSCALING_METRIC_PUSH_INTERVAL_S, which the
# lab's nodes set to 0.5 s, and still checks look_back_period_s against metrics_interval_s.)
LOOK = {"look_back_period_s": 2.0, "metrics_interval_s": 0.5}


def connect() -> str:
    """Join the Ray cluster at RAY_ADDRESS and start Serve (its HTTP proxy on the head node, on
    RAY_SERVE_URL's port; kept as it is when Serve runs); returns the food app's URL."""
    import ray
    from ray import serve

    address, serve_url = labenv.url("RAY_ADDRESS"), labenv.url("RAY_SERVE_URL")
    if not ray.is_initialized():
        _use_token()
        if address.rsplit(":", 1)[0] in ray_loopback.LOOPBACK:
            ray_loopback.keep_loopback()  # the lab's local cluster listens on 127.0.0.1 only
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    host, port = serve_url.split("://")[-1].rsplit(":", 1)
    serve.start(
        proxy_location="HeadOnly",
        http_options={"host": host, "port": int(port), "request_timeout_s": REQUEST_TIMEOUT_S},
        logging_config={"enable_access_log": False, "log_level": "WARNING"},
    )
    return f"{serve_url}{ROUTE}"


def _use_token() -> None:
    """Ray's token for this client: RAY_AUTH_MODE and RAY_AUTH_TOKEN_PATH as labenv.load() set
    them, else the lab's token file where notebook 2 puts it on Chameleon (.lab/ray_token).
    Ray reads its settings once, when it is imported: they are read again here."""
    token = LAB_DIR / "ray_token"
    if not os.environ.get("RAY_AUTH_MODE") and token.exists():
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token.resolve()))
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def nodes() -> pd.DataFrame:
    """The cluster's nodes as Ray lists them: id, address, alive, CPUs and GPUs."""
    import ray

    return pd.DataFrame(
        {
            "node": n["NodeID"][:8],
            "address": n["NodeManagerAddress"],
            "alive": n["Alive"],
            "CPUs": n["Resources"].get("CPU", 0),
            "GPUs": n["Resources"].get("GPU", 0),
        }
        for n in ray.nodes()
        if n["Alive"]
    )


def image_body(seed: int = 0) -> bytes:
    """One image as the deployment (and Triton's food_classifier_onnx) takes it: 3x224x224
    float32 values, here random, as raw bytes."""
    rng = np.random.default_rng(seed)
    return rng.random(IMAGE_SHAPE, dtype=np.float32).tobytes()


_running: dict = {}  # the deployment serve.run() last ran from here, by app


def deploy(
    deployment, app: str = APP, route: str = ROUTE, init: dict | None = None
) -> pd.DataFrame:
    """serve.run() the deployment as the app `food` at /food (or `app` at `route`, its class made
    with `init`: the three-way comparison serves a batched one beside it) and wait until it
    serves; an autoscaling one gets LOOK added. Returns where its replicas run (placement()).

    serve.run() from Python gives the code a new version each time, so Ray replaces every
    replica even when only num_replicas changed (seconds each on a small node): a fixed-size
    deployment whose options already serve, with all its replicas running, is kept as it is."""
    from ray import serve

    fixed = deployment._deployment_config.autoscaling_config is None
    if fixed and app in _running and (deployment, init) == _running[app]:
        if replica_states(app) == {"RUNNING": deployment.num_replicas}:
            return placement()
    config = deployment._deployment_config.autoscaling_config
    with warnings.catch_warnings():  # Ray's deprecation notice of metrics_interval_s (above)
        warnings.simplefilter("ignore", DeprecationWarning)
        if config is not None:
            written = config.model_dump(exclude_unset=True)
            deployment = deployment.options(autoscaling_config={**written, **LOOK})
        serve.run(deployment.bind(**(init or {})), name=app, route_prefix=route)
    _running[app] = (deployment, init)
    return placement()


def replica_states(name: str = APP) -> dict:
    """{state: count} of the deployment's replicas (RUNNING, STARTING, STOPPING, ...)."""
    from ray import serve

    app = serve.status().applications.get(name)
    if app is None:
        return {}
    return dict(next(iter(app.deployments.values())).replica_states)


def _replica_actors() -> list:
    from ray.util.state import list_actors

    return list_actors(
        filters=[("class_name", "=", f"ServeReplica:{APP}:FoodClassifier"), ("state", "=", "ALIVE")]
    )


def placement() -> pd.DataFrame:
    """Each running replica and the node it runs on (Ray's state API)."""
    rows = [
        {"replica": a.name.split("#")[-1], "node": a.node_id[:8], "pid": a.pid}
        for a in _replica_actors()
    ]
    return pd.DataFrame(rows, columns=["replica", "node", "pid"]).sort_values("node")


def kill_replica() -> dict:
    """Crash one replica, as a node's failure would: ray.kill() its actor, without restart (Serve's
    controller notices and starts another). Returns which one, where, and when (perf_counter)."""
    import ray

    actor = _replica_actors()[0]
    ray.kill(ray.get_actor(actor.name, namespace="serve"), no_restart=True)
    return {
        "replica": actor.name.split("#")[-1],
        "node": actor.node_id[:8],
        "at": time.perf_counter(),
    }


def wait_replaced(killed: dict, count: int, timeout: float = 120.0):
    """Seconds from kill_replica() until `count` replicas run again, the killed one not among
    them (Ray's state API); None if not within `timeout`."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        alive = placement()
        if len(alive) >= count and killed["replica"] not in set(alive["replica"]):
            if replica_states().get("RUNNING", 0) >= count:
                return time.perf_counter() - killed["at"]
        time.sleep(0.5)
    return None


class Replicas:
    """serve.status() sampled every `interval_s` in a background thread while a block runs:
    how many replicas run, start and stop over time (t_s from perf_counter's `t0`)."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s, self.samples = interval_s, []
        self._stop = threading.Event()

    def _loop(self) -> None:
        while not self._stop.is_set():
            states = replica_states()
            self.samples.append({"at": time.perf_counter(), **states})
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Replicas:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def __getstate__(self) -> dict:
        # the samples are kept across a saved namespace, not the thread
        # (maintainers/reference/resume_state.py)
        return {"interval_s": self.interval_s, "samples": self.samples}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self._stop = threading.Event()

    def wait_for(self, running: int, timeout: float = 90.0) -> bool:
        """Keep sampling until `running` replicas run and none starts or stops (the autoscaler
        done), at most `timeout` s; True if it happened."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.samples and self.samples[-1] == {
                "at": self.samples[-1]["at"],
                "RUNNING": running,
            }:
                return True
            time.sleep(self.interval_s)
        return False

    def over_time(self, t0: float) -> pd.DataFrame:
        table = pd.DataFrame(self.samples).fillna(0)
        table.insert(0, "t_s", table.pop("at") - t0)
        return table


def recovery_s(windows: pd.DataFrame, t_step: float, t_end: float, budget_ms: float):
    """Seconds from the step at `t_step` until the p95 of every later window up to `t_end` is
    within `budget_ms` (None: it never was, up to `t_end`). A window in which no request was sent
    (the load over, no p95) is not counted either way."""
    sent = windows[windows["p95_ms"].notna()]
    during = sent[(sent["t_s"] > t_step) & (sent["t_s"] <= t_end)]
    over = during[during["p95_ms"] > budget_ms]
    if over.empty:
        return float(during["t_s"].min() - 1 - t_step) if len(during) else 0.0
    last = over["t_s"].max()
    return None if last >= during["t_s"].max() else float(last - t_step)


def row(df: pd.DataFrame, name: str, servers: int, service_ms: float | None = None) -> dict:
    """A run's summary (loadgen.summarize) with the laws per server: busy_U = X·S / servers (each
    replica's or instance's busy share) and in_flight_N = X·R; service_ms replaces the mean
    `infer` (Triton's own statistics)."""
    summary = loadgen.summarize(df)
    s = summary["infer_mean_ms"] if service_ms is None else service_ms
    laws = queueing.laws(summary["throughput_rps"], summary["mean_ms"], s, instances=servers)
    keep = ("requests", "errors", "request_rate", "throughput_rps", "median_ms", "p95_ms")
    return {
        "run": name,
        "servers": servers,
        **{k: summary.get(k) for k in keep},
        "service_ms": s,
        "delayed_pct": summary.get("delayed_pct"),
        "busy_U": laws["busy_U"],
        "in_flight_N": laws["in_flight_N"],
    }
