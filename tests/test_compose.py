"""docker/*.yaml: valid Compose files, portable paths, GPU reservations, health checks, pins.

No Docker engine here, so the files are parsed with PyYAML and validated against the Compose
specification's JSON schema (the copy that the check-jsonschema package ships), and the host
paths are read from the parsed volumes and build sections.
"""
from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path, PurePosixPath

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
BASE_FILES = ["docker-compose-fastapi.yaml", "docker-compose-triton.yaml"]
CPU_OVERRIDES = {"docker-compose-fastapi.yaml": "docker-compose-cpu.yaml",
                 "docker-compose-triton.yaml": "docker-compose-triton-cpu.yaml"}
COMPOSE_FILES = sorted(p.name for p in DOCKER.glob("docker-compose*.yaml"))
# host folders that are created at run time (gitignored), so they may be missing in a checkout
CREATED_AT_RUN_TIME = {"results", "model_repository"}
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
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} with env (default: unset)."""
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
                source = parts[0] if len(parts) > 1 else None  # "/data" alone is an anonymous volume
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


def env_example() -> dict[str, str]:
    values = {}
    for line in (DOCKER / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env.example line is not KEY=VALUE: {line!r}"
            values[key.strip()] = value.strip()
    return values


def gpu_devices(svc: dict) -> list[dict]:
    return (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []


# ------------------------------------------------------------------------------------ the files

def test_expected_files_exist():
    for name in BASE_FILES + list(CPU_OVERRIDES.values()) + [".env.example", "Dockerfile.jupyter",
                                                            "Dockerfile.triton", "setup_host.sh"]:
        assert (DOCKER / name).is_file(), name
    assert set(COMPOSE_FILES) == set(BASE_FILES) | set(CPU_OVERRIDES.values())


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
    for svc, raw in host_paths(load(name)):
        path = (DOCKER / interpolate(raw)).resolve()
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        assert path.is_relative_to(REPO), f"{svc}: {raw} leaves the repository"
        if str(rel) not in CREATED_AT_RUN_TIME:
            assert path.exists(), f"{svc}: {raw} -> {path} does not exist"


@pytest.mark.parametrize("name", BASE_FILES)
def test_builds_use_repo_root_and_existing_dockerfiles(name):
    for svc_name, svc in load(name)["services"].items():
        build = svc["build"]
        assert build["context"] == "..", svc_name
        for backend in ("pt", "onnx"):
            dockerfile = interpolate(build["dockerfile"], {"FASTAPI_BACKEND": backend})
            assert (REPO / dockerfile).is_file(), f"{svc_name}: {dockerfile}"


@pytest.mark.parametrize("name", BASE_FILES)
def test_every_service_has_a_healthcheck(name):
    for svc_name, svc in load(name)["services"].items():
        test = (svc.get("healthcheck") or {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{svc_name} has no healthcheck"
        assert not svc["healthcheck"].get("disable"), svc_name


@pytest.mark.parametrize("name", BASE_FILES)
def test_gpu_services_reserve_all_gpus(name):
    services = load(name)["services"]
    gpu_svcs = {n for n, s in services.items() if gpu_devices(s)}
    assert gpu_svcs == {"docker-compose-fastapi.yaml": {"fastapi_server"},
                        "docker-compose-triton.yaml": {"triton_server"}}[name]
    for n in gpu_svcs:
        (dev,) = gpu_devices(services[n])
        assert dev == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}


@pytest.mark.parametrize("base", BASE_FILES)
def test_cpu_override_resets_every_gpu_reservation(base):
    services = load(base)["services"]
    override = load(CPU_OVERRIDES[base])["services"]
    gpu_svcs = {n for n, s in services.items() if gpu_devices(s)}
    assert set(override) == gpu_svcs, "the override must touch exactly the GPU services"
    for n in gpu_svcs:
        deploy = override[n]["deploy"]
        assert deploy.get("__compose_tag__") == "!reset", f"{n}: deploy is not reset"
        assert override[n]["environment"]["FOOD11_DEVICE"] == "cpu"
        assert "/cpu" in override[n]["build"]["args"]["TORCH_INDEX_URL"]
    text = (DOCKER / CPU_OVERRIDES[base]).read_text()
    assert f"-f {base} -f {CPU_OVERRIDES[base]}" in text, "usage line missing"


def test_ports_and_urls():
    fastapi = load("docker-compose-fastapi.yaml")["services"]
    assert fastapi["flask"]["ports"] == ["80:5000"]
    assert fastapi["fastapi_server"]["ports"] == ["8000:8000"]
    assert fastapi["jupyter"]["ports"] == ["8888:8888"]
    assert fastapi["flask"]["environment"]["FASTAPI_SERVER_URL"] == "http://fastapi_server:8000"
    for key in ("FASTAPI_SERVER_URL", "FLASK_SERVER_URL"):
        assert key in fastapi["jupyter"]["environment"]
    triton = load("docker-compose-triton.yaml")["services"]
    assert triton["triton_server"]["ports"] == ["8000:8000", "8001:8001", "8002:8002"]
    assert triton["flask"]["environment"]["TRITON_SERVER_URL"] == "http://triton_server:8000"
    assert "FOOD11_MODEL_NAME" in triton["flask"]["environment"]
    cmd = triton["triton_server"]["command"]
    assert "--model-control-mode=explicit" in cmd and "--model-repository=/models" in cmd
    assert triton["triton_server"]["shm_size"] in ("2gb", "2g", "2GB")
    # system shared memory (notebook 7): perf_analyzer in jupyter and Triton share one /dev/shm
    assert triton["triton_server"]["ipc"] == "shareable" and triton["jupyter"]["ipc"] == "service:triton_server"
    assert "triton_server" in triton["jupyter"]["depends_on"]
    assert "../model_repository:/models" in triton["triton_server"]["volumes"]
    jup_vols = triton["jupyter"]["volumes"]
    assert any(v.startswith("../model_repository:") and not v.endswith(":ro") for v in jup_vols)
    for stack in (fastapi, triton):
        assert stack["jupyter"]["environment"]["LAB_MODE"] == "docker"
        assert stack["jupyter"]["environment"]["JUPYTER_TOKEN"].startswith("${JUPYTER_TOKEN")


def test_every_variable_is_documented_in_env_example():
    documented = env_example()
    for name in COMPOSE_FILES:
        for var in variables_used((DOCKER / name).read_text()):
            assert var in documented, f"{name} uses ${{{var}}} but docker/.env.example does not set it"


def test_defaults_in_compose_match_env_example():
    documented = env_example()
    for name in BASE_FILES:
        for m in VAR.finditer((DOCKER / name).read_text()):
            if m.group("op") == ":-":
                assert documented[m.group("name")] == m.group("arg"), m.group(0)


def _dockerfile_images(path: Path) -> list[str]:
    text = path.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, flags=re.M))
    images = []
    for ref in re.findall(r"^FROM (\S+)", text, flags=re.M):
        images.append(re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), "<unset>"), ref))
    return images


@pytest.mark.parametrize("dockerfile", ["fastapi_pt/Dockerfile", "fastapi_onnx/Dockerfile",
                                        "flask_app/Dockerfile", "docker/Dockerfile.jupyter",
                                        "docker/Dockerfile.triton"])
def test_base_images_are_pinned(dockerfile):
    images = _dockerfile_images(REPO / dockerfile)
    assert images
    for image in images:
        name, _, tag = image.rpartition(":")
        assert name and tag and "/" not in tag, f"{dockerfile}: {image} has no tag"
        assert tag != "latest" and "<unset>" not in image, f"{dockerfile}: {image} is not pinned"
        assert re.search(r"\d", tag), f"{dockerfile}: {image} tag has no version"


def test_triton_and_torch_versions_in_one_place():
    triton_df = (DOCKER / "Dockerfile.triton").read_text()
    assert "nvcr.io/nvidia/tritonserver:${TRITON_IMAGE_TAG}" in triton_df
    env = env_example()
    assert env["TRITON_IMAGE_TAG"] == "24.10-py3"
    assert (env["TORCH_VERSION"], env["TORCHVISION_VERSION"]) == ("2.4.1", "0.19.1")
    for df in ("fastapi_pt/Dockerfile", "fastapi_onnx/Dockerfile", "docker/Dockerfile.triton"):
        args = dict(re.findall(r"^ARG (\w+)=(\S+)", (REPO / df).read_text(), flags=re.M))
        for key in ("TORCH_VERSION", "TORCHVISION_VERSION", "TORCH_INDEX_URL"):
            assert args[key] == env[key], f"{df}: ARG {key} default differs from .env.example"


def test_service_requirements_are_names_only():
    pinned = set()
    for line in (REPO / "requirements/constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            pinned.add(re.sub(r"\[.*\]", "", line.split("==")[0]).strip().lower())
    for req in ["fastapi_pt/requirements.txt", "fastapi_onnx/requirements.txt",
                "flask_app/requirements.txt", "docker/requirements-jupyter.txt"]:
        for line in (REPO / req).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                assert not re.search(r"[=<>~!]", line), f"{req}: {line} carries a version"
                assert re.sub(r"\[.*\]", "", line).lower() in pinned, f"{req}: {line} not in constraints"


# ------------------------------------------------------------------ the checks can fail

def test_checks_catch_bad_files(compose_schema):
    bad = yaml.load("""
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
""", Loader=ComposeLoader)
    validator_cls = jsonschema.validators.validator_for(compose_schema)
    assert list(validator_cls(compose_schema).iter_errors(bad)), "schema accepted a bad file"
    assert sorted(absolute_host_paths(bad)) == ["web: ${DATA:-/srv/lab}", "web: /home/cc/data",
                                                "web: /opt/src"]
    assert interpolate("${A:-x}/${B}", {"B": "y"}) == "x/y"
