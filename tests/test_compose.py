"""docker/*.yaml: valid Compose files, portable paths, GPU reservations, health checks, pins.

Static checks, no Docker engine needed (`make test-docker` runs the stacks for real): the files
are parsed with PyYAML, validated against the Compose specification's JSON schema (the copy that
the check-jsonschema package ships), `extends` resolved as Compose does.
"""

from __future__ import annotations

import json
import re
import subprocess
from importlib import resources
from pathlib import Path, PurePosixPath

import jsonschema
import pytest
import yaml

from maintainers.reliability.safe_defaults import merge_extends

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
BASE_FILES = ["docker-compose-fastapi.yaml", "docker-compose-triton.yaml"]
SERVICES = "services.yaml"  # how each image is built; the stacks extend it
CPU_OVERRIDES = {
    "docker-compose-fastapi.yaml": "docker-compose-cpu.yaml",
    "docker-compose-triton.yaml": "docker-compose-triton-cpu.yaml",
}
COMPOSE_FILES = sorted(p.name for p in DOCKER.glob("docker-compose*.yaml")) + [SERVICES]
# host folders made at run time, so a clean checkout lacks them: results/ and model_repository/
# by the stacks, artifacts/ by `make artifacts` (each is gitignored: checked below)
CREATED_AT_RUN_TIME = {"results", "model_repository", "artifacts"}
VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}")


class ComposeLoader(yaml.SafeLoader):
    """YAML loader that knows Compose's merge tags (!reset, !override)."""


def _tagged(loader, node):
    if isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)
    return {"__compose_tag__": node.tag, "value": value}


ComposeLoader.add_constructor("!reset", _tagged)
ComposeLoader.add_constructor("!override", _tagged)


def load(name: str) -> dict:
    with open(DOCKER / name) as f:
        return yaml.load(f, Loader=ComposeLoader)


def stack(name: str) -> dict:
    """A stack file's services with `extends` resolved (services.yaml merged in)."""
    return merge_extends(load(name), DOCKER, lambda path: load(path.name))["services"]


def untag(obj):
    """The document as Compose sees one file: !reset X / !override X stand for X."""
    if isinstance(obj, dict):
        if "__compose_tag__" in obj:
            return untag(obj["value"])
        return {k: untag(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [untag(v) for v in obj]
    return obj


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} with env (default:
    unset)."""
    env = env or {}

    def sub(m):
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        if name in env and (env[name] or not (op or "").startswith(":")):
            return env[name]
        if op in (":-", "-"):
            return arg
        if op in (":?", "?"):
            return f"<required {name}>"
        return ""

    return VAR.sub(sub, value)


@pytest.fixture(scope="module")
def compose_schema() -> dict:
    path = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    return json.loads(path.read_text())


def host_paths(doc: dict) -> list[tuple[str, str]]:
    """(service, host path) for every bind-mount source, build context and env_file."""
    found = []
    for svc_name, svc in (doc.get("services") or {}).items():
        for vol in svc.get("volumes") or []:
            if isinstance(vol, str):
                parts = vol.split(":")
                # "/data" alone is an anonymous volume
                source = parts[0] if len(parts) > 1 else None
            else:
                source = vol.get("source") if vol.get("type", "volume") == "bind" else None
            if source is not None and (source.startswith((".", "/", "~", "$")) or "/" in source):
                found.append((svc_name, source))
        build = svc.get("build")
        if isinstance(build, str):
            found.append((svc_name, build))
        elif isinstance(build, dict) and "context" in build:
            found.append((svc_name, build["context"]))
        env_file = svc.get("env_file") or []
        for f in [env_file] if isinstance(env_file, str) else env_file:
            found.append((svc_name, f if isinstance(f, str) else f["path"]))
    return found


def absolute_host_paths(doc: dict) -> list[str]:
    bad = []
    for svc, raw in host_paths(doc):
        path = interpolate(raw)
        if path.startswith(("/", "~")) or PurePosixPath(path).is_absolute():
            bad.append(f"{svc}: {raw}")
    return bad


def variables_used(text: str) -> set[str]:
    return {m.group("name") for m in VAR.finditer(text)}


ENV_LINE = re.compile(r"^(?P<commented># )?(?P<key>[A-Z][A-Z0-9_]*)=(?P<value>\S*)$")


def env_example() -> dict[str, tuple[str, bool]]:
    """docker/.env.example: KEY -> (value, set); `# KEY=value` lines document a default left
    unset."""
    values = {}
    for line in (DOCKER / ".env.example").read_text().splitlines():
        m = ENV_LINE.match(line.strip())
        if m:
            values[m.group("key")] = (m.group("value"), not m.group("commented"))
    return values


def defaults() -> dict[str, set[str]]:
    """Every ${VAR:-default} in the compose files: VAR -> the defaults given for it."""
    found: dict[str, set[str]] = {}
    for name in COMPOSE_FILES:
        for m in VAR.finditer((DOCKER / name).read_text()):
            if m.group("op") == ":-":
                found.setdefault(m.group("name"), set()).add(m.group("arg"))
    return found


def gpu_devices(svc: dict) -> list[dict]:
    reservations = ((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}
    return reservations.get("devices") or []


# ------------------------------------------------------------------------------------ the files


def test_expected_files_exist():
    for name in (
        BASE_FILES
        + list(CPU_OVERRIDES.values())
        + [SERVICES, ".env.example", "init_env.sh", "setup_host.sh"]
    ):
        assert (DOCKER / name).is_file(), name
    for image in ("fastapi", "flask", "jupyter", "triton"):
        assert (DOCKER / f"Dockerfile.{image}").is_file() and (
            DOCKER / f"Dockerfile.{image}.dockerignore"
        ).is_file()
    assert set(COMPOSE_FILES) == set(BASE_FILES) | set(CPU_OVERRIDES.values()) | {SERVICES}


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_valid_against_compose_spec(name, compose_schema):
    doc = untag(load(name))
    validator_cls = jsonschema.validators.validator_for(compose_schema)
    errors = sorted(validator_cls(compose_schema).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_no_absolute_host_paths(name):
    doc = load(name)
    assert absolute_host_paths(doc) == []
    assert "/home/cc" not in (DOCKER / name).read_text()


@pytest.mark.parametrize("name", BASE_FILES)
def test_relative_host_paths_exist(name):
    for svc, raw in host_paths({"services": stack(name)}):
        path = (DOCKER / interpolate(raw)).resolve()
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        assert path.is_relative_to(REPO), f"{svc}: {raw} leaves the repository"
        if str(rel) not in CREATED_AT_RUN_TIME:
            assert path.exists(), f"{svc}: {raw} -> {path} does not exist"


def test_folders_made_at_run_time_are_gitignored():
    """Only output folders may be missing from a checkout, never a tracked one misnamed."""
    ignored = {line.strip().strip("/") for line in (REPO / ".gitignore").read_text().splitlines()}
    assert CREATED_AT_RUN_TIME <= ignored, CREATED_AT_RUN_TIME - ignored
    tracked = subprocess.run(
        ["git", "ls-files", *sorted(CREATED_AT_RUN_TIME)], cwd=REPO, capture_output=True, text=True
    ).stdout
    assert tracked == "", tracked


@pytest.mark.parametrize("name", BASE_FILES)
def test_every_service_extends_services_yaml_and_builds_from_the_repository(name):
    raw = load(name)["services"]
    for svc_name, svc in stack(name).items():
        assert raw[svc_name]["extends"] == {"file": SERVICES, "service": svc_name}
        build = svc["build"]
        assert build["context"] == "..", svc_name
        dockerfile = REPO / build["dockerfile"]
        assert dockerfile.is_file(), f"{svc_name}: {dockerfile}"
        for arg in build.get("args", {}):
            assert re.search(rf"^ARG {arg}$", dockerfile.read_text(), flags=re.M), (
                f"{dockerfile.name}: no ARG {arg}"
            )


def test_one_fastapi_dockerfile_two_targets_sharing_the_torch_stage():
    text = (DOCKER / "Dockerfile.fastapi").read_text()
    assert re.findall(r"^FROM (\S+) AS (\w+)$", text, flags=re.M) == [
        ("${PYTHON_IMAGE}", "torch"),
        ("torch", "pt"),
        ("torch", "onnx"),
    ]
    target = load(SERVICES)["services"]["fastapi_server"]["build"]["target"]
    for backend in ("pt", "onnx"):
        assert interpolate(target, {"FASTAPI_BACKEND": backend}) == backend
        stage = text.split(f" AS {backend}\n")[1].split("\nFROM ")[0]
        assert f"COPY fastapi_{backend}/ " in stage and "USER app" in stage.split("CMD")[0], backend
    torch_stage = text.split(" AS pt\n")[0]
    assert "pip install --index-url" in torch_stage and "ONNXRUNTIME" not in torch_stage


@pytest.mark.parametrize("name", BASE_FILES)
def test_every_service_has_a_healthcheck(name):
    for svc_name, svc in stack(name).items():
        test = (svc.get("healthcheck") or {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{svc_name} has no healthcheck"
        assert not svc["healthcheck"].get("disable"), svc_name


@pytest.mark.parametrize("name", BASE_FILES)
def test_gpu_services_reserve_all_gpus(name):
    services = stack(name)
    gpu_svcs = {n for n, s in services.items() if gpu_devices(s)}
    assert (
        gpu_svcs
        == {
            "docker-compose-fastapi.yaml": {"fastapi_server"},
            "docker-compose-triton.yaml": {"triton_server"},
        }[name]
    )
    for n in gpu_svcs:
        (dev,) = gpu_devices(services[n])
        assert dev == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}


@pytest.mark.parametrize("base", BASE_FILES)
def test_cpu_override_resets_every_gpu_reservation(base):
    services = stack(base)
    override = load(CPU_OVERRIDES[base])["services"]
    gpu_svcs = {n for n, s in services.items() if gpu_devices(s)}
    assert set(override) == gpu_svcs | {"jupyter"}, (
        "the override touches the GPU services and jupyter's note"
    )
    for n in gpu_svcs:
        deploy = override[n]["deploy"]
        assert deploy.get("__compose_tag__") == "!reset", f"{n}: deploy is not reset"
        assert override[n]["environment"]["FOOD11_DEVICE"] == "cpu"
        index = override[n]["build"]["args"]["TORCH_INDEX_URL"]
        assert index.startswith("${CPU_TORCH_INDEX_URL:-") and "/cpu" in interpolate(index), index
    text = (DOCKER / CPU_OVERRIDES[base]).read_text()
    assert f"-f {base} -f {CPU_OVERRIDES[base]}" in text, "usage line missing"


@pytest.mark.parametrize("base", BASE_FILES)
def test_jupyter_knows_the_compose_files_its_stack_runs_with(base):
    """labenv prints host commands with LAB_COMPOSE_FILES: with the CPU override they must keep
    it."""
    assert stack(base)["jupyter"]["environment"]["LAB_COMPOSE_FILES"] == f"-f {base}"
    override = load(CPU_OVERRIDES[base])["services"]["jupyter"]["environment"]["LAB_COMPOSE_FILES"]
    assert override == f"-f {base} -f {CPU_OVERRIDES[base]}"


def test_ports_and_urls():
    fastapi = stack("docker-compose-fastapi.yaml")
    public = "${PUBLISH_ADDRESS:-0.0.0.0}"
    assert fastapi["flask"]["ports"] == [f"{public}:${{FLASK_PORT:-80}}:5000"]
    assert fastapi["jupyter"]["ports"] == [f"{public}:${{JUPYTER_PORT:-8888}}:8888"]
    # no authentication on these two: only on the node itself (SSH tunnel from a laptop)
    assert fastapi["fastapi_server"]["ports"] == ["127.0.0.1:${FASTAPI_PORT:-8000}:8000"]
    assert fastapi["flask"]["environment"]["FASTAPI_SERVER_URL"] == "http://fastapi_server:8000"
    for key in ("FASTAPI_SERVER_URL", "FLASK_SERVER_URL"):
        assert key in fastapi["jupyter"]["environment"]
    triton = stack("docker-compose-triton.yaml")
    assert triton["triton_server"]["ports"] == [
        "127.0.0.1:${TRITON_HTTP_PORT:-8000}:8000",
        "127.0.0.1:${TRITON_GRPC_PORT:-8001}:8001",
        "127.0.0.1:${TRITON_METRICS_PORT:-8002}:8002",
    ]
    assert triton["flask"]["environment"]["TRITON_SERVER_URL"] == "http://triton_server:8000"
    assert "FOOD11_MODEL_NAME" in triton["flask"]["environment"]
    assert triton["triton_server"]["shm_size"] in ("2gb", "2g", "2GB")
    # system shared memory (notebook 7): perf_analyzer in jupyter and Triton share one /dev/shm
    assert (
        triton["triton_server"]["ipc"] == "shareable"
        and triton["jupyter"]["ipc"] == "service:triton_server"
    )
    assert "triton_server" in triton["jupyter"]["depends_on"]
    assert "../model_repository:/models" in triton["triton_server"]["volumes"]
    jup_vols = triton["jupyter"]["volumes"]
    assert any(v.startswith("../model_repository:") and not v.endswith(":ro") for v in jup_vols)
    for services in (fastapi, triton):
        jupyter = services["jupyter"]
        assert jupyter["environment"]["LAB_MODE"] == "docker"
        assert jupyter["environment"]["JUPYTER_TOKEN"].startswith("${JUPYTER_TOKEN:?")
        assert "init_env.sh" in jupyter["environment"]["JUPYTER_TOKEN"]
        # the Jupyter user is the host's (files saved belong to the student) and can write what
        # it mounts
        assert jupyter["environment"]["NB_UID"] == "${LAB_UID:-1000}"
        writable = {v.split(":")[1] for v in jupyter["volumes"] if not v.endswith(":ro")}
        assert set(jupyter["environment"]["CHOWN_EXTRA"].split(",")) == writable
        assert "/home/jovyan/work/notebooks" in writable


def test_triton_keeps_serving_when_one_model_fails_to_load():
    triton = stack("docker-compose-triton.yaml")["triton_server"]
    cmd = triton["command"]
    for flag in (
        "--model-control-mode=explicit",
        "--model-repository=/models",
        "--load-model=*",
        "--exit-on-error=false",
        "--strict-readiness=false",
    ):
        assert flag in cmd, flag
    # an engine that cannot raise RLIMIT_MEMLOCK (rootless, CI) refuses `memlock: -1`
    assert "memlock" not in (triton.get("ulimits") or {})


def test_triton_state_changing_apis_need_the_node_secret():
    """HTTP and gRPC: every state-changing API group (model repository, shared memory, logging,
    trace: the groups local mode restricts) behind the header with TRITON_ADMIN_KEY; Jupyter has
    it."""
    from servelab.labenv import ADMIN_HEADER, RESTRICTED_APIS
    from servelab.serving.triton_watchdog import restricted_api_args

    stack_services = stack("docker-compose-triton.yaml")
    triton = stack_services["triton_server"]
    cmd = triton["command"]
    groups = ",".join(RESTRICTED_APIS)
    # the watchdog adds the flags from the key in its environment: no command line but
    # tritonserver's own holds the key (issue 35)
    own = cmd[: cmd.index("--")]
    assert f"--restrict-apis={groups}" in own and not any("TRITON_ADMIN_KEY" in a for a in cmd)
    assert triton["environment"]["TRITON_ADMIN_KEY"].startswith("${TRITON_ADMIN_KEY:?")
    for arg, flag in zip(
        restricted_api_args(groups, "KEY"), ("--http-restricted-api", "--grpc-restricted-protocol")
    ):
        assert arg == f"{flag}={groups}:{ADMIN_HEADER}=KEY", arg
    assert stack_services["jupyter"]["environment"]["TRITON_ADMIN_KEY"].startswith(
        "${TRITON_ADMIN_KEY:?"
    )
    # the public page has no use for it
    assert "TRITON_ADMIN_KEY" not in str(stack_services["flask"])


def test_triton_runs_under_the_watchdog_and_its_health_check_asks_each_model():
    """A dead Python-backend stub left its model answering 500 while the health check (server
    readiness only) stayed green: the watchdog reloads it, and the check asks it and each model."""
    triton = stack("docker-compose-triton.yaml")["triton_server"]
    cmd = triton["command"]
    assert cmd[:3] == ["python3", "-m", "servelab.serving.triton_watchdog"], cmd[:4]
    assert cmd[cmd.index("--") + 1] == "tritonserver"
    assert "--backend-config=python,shm-region-prefix-name=servelab_triton_8000_" in cmd
    health = triton["healthcheck"]["test"]
    assert health[1:5] == ["python3", "-m", "servelab.serving.triton_watchdog", "--check"], health
    health_file = next(a for a in cmd if a.startswith("--health-file="))
    assert health_file in health and "--url=http://127.0.0.1:8000" in health
    assert triton["environment"]["TRITON_ADMIN_KEY"].startswith("${TRITON_ADMIN_KEY:?")


def test_every_variable_is_documented_in_env_example():
    documented = env_example()
    for name in COMPOSE_FILES:
        for var in variables_used((DOCKER / name).read_text()):
            assert var in documented, (
                f"{name} uses ${{{var}}} but docker/.env.example does not mention it"
            )


def test_each_version_and_image_has_one_default_and_env_example_shows_it():
    documented = env_example()
    for var, values in defaults().items():
        assert len(values) == 1, f"${{{var}}} has different defaults: {values}"
        (default,) = values
        value, is_set = documented[var]
        assert value == default, (
            f".env.example shows {var}={value}, the compose files default to {default}"
        )
    # settings only init_env.sh can know are set; the rest stay defaults until a student
    # changes them
    assert {k for k, (_, is_set) in documented.items() if is_set} == {
        "JUPYTER_TOKEN",
        "TRITON_ADMIN_KEY",
        "LAB_UID",
        "LAB_GID",
        "FASTAPI_BACKEND",
        "FOOD11_MODEL_NAME",
    }
    assert documented["JUPYTER_TOKEN"] == documented["TRITON_ADMIN_KEY"] == ("", True)


def test_base_images_are_named_only_in_services_yaml():
    args = {
        arg: value
        for svc in load(SERVICES)["services"].values()
        for arg, value in (svc["build"].get("args") or {}).items()
        if arg.endswith("_IMAGE")
    }
    assert {k: interpolate(v) for k, v in args.items()} == {
        "PYTHON_IMAGE": "python:3.11.10-slim-bookworm",
        "TRITON_IMAGE": "nvcr.io/nvidia/tritonserver:24.10-py3",  # Triton 2.51, as local mode
        "JUPYTER_IMAGE": "quay.io/jupyter/minimal-notebook:python-3.11.10",
    }
    for dockerfile in sorted(DOCKER.glob("Dockerfile.*")):
        if dockerfile.suffix == ".dockerignore":
            continue
        text = dockerfile.read_text()
        first = re.search(r"^FROM (\S+)", text, flags=re.M).group(1)
        assert re.fullmatch(r"\$\{\w+_IMAGE\}", first), f"{dockerfile.name}: FROM {first}"
        assert not re.search(r"^ARG \w+=", text, flags=re.M), (
            f"{dockerfile.name}: an ARG default pins a version"
        )


def test_service_requirements_are_names_only():
    pinned = set()
    for line in (REPO / "requirements/constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            pinned.add(re.sub(r"\[.*\]", "", line.split("==")[0]).strip().lower())
    for req in [
        "fastapi_pt/requirements.txt",
        "fastapi_onnx/requirements.txt",
        "flask_app/requirements.txt",
        "docker/requirements-jupyter.txt",
    ]:
        for line in (REPO / req).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                assert not re.search(r"[=<>~!]", line), f"{req}: {line} carries a version"
                assert re.sub(r"\[.*\]", "", line).lower() in pinned, (
                    f"{req}: {line} not in constraints"
                )


def test_init_env_makes_a_private_env_once(tmp_path):
    """docker/init_env.sh in a copy of the folder layout: token, ids, folders; a second run
    keeps the token."""
    repo = tmp_path / "repo"
    (repo / "docker").mkdir(parents=True)
    for name in ("init_env.sh", ".env.example"):
        (repo / "docker" / name).write_bytes((DOCKER / name).read_bytes())

    def run():
        return subprocess.run(
            ["bash", "docker/init_env.sh"], cwd=repo, capture_output=True, text=True
        )

    first = run()
    assert first.returncode == 0, first.stderr
    env_file = repo / "docker" / ".env"
    values = dict(
        line.split("=", 1)
        for line in env_file.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert re.fullmatch(r"[0-9a-f]{32}", values["JUPYTER_TOKEN"])
    assert re.fullmatch(r"[0-9a-f]{32}", values["TRITON_ADMIN_KEY"])
    assert values["TRITON_ADMIN_KEY"] != values["JUPYTER_TOKEN"]
    owner = repo.stat().st_uid
    assert values["LAB_UID"] == (str(owner) if owner else "1000")
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    assert (repo / "results").is_dir() and (repo / "model_repository").is_dir()
    assert run().returncode == 0 and env_file.read_text().count("JUPYTER_TOKEN=") == 1
    assert values["JUPYTER_TOKEN"] in env_file.read_text()


# ------------------------------------------------------------------ the checks can fail


def test_checks_catch_bad_files(compose_schema):
    bad = yaml.load(
        """
services:
  web:
    image: nginx:1.27
    ports: "80:80"            # must be a list
    volumes:
      - /home/cc/data:/data
      - type: bind
        source: ${DATA:-/srv/lab}
        target: /lab
      - cache:/cache
    build:
      context: /opt/src
volumes:
  cache: {}
""",
        Loader=ComposeLoader,
    )
    validator_cls = jsonschema.validators.validator_for(compose_schema)
    assert list(validator_cls(compose_schema).iter_errors(bad)), "schema accepted a bad file"
    assert sorted(absolute_host_paths(bad)) == [
        "web: ${DATA:-/srv/lab}",
        "web: /home/cc/data",
        "web: /opt/src",
    ]
    assert interpolate("${A:-x}/${B}", {"B": "y"}) == "x/y"
    assert ENV_LINE.match("# TORCH_VERSION=2.4.1").group("commented") and not ENV_LINE.match(
        "# a comment"
    )
