"""Each GPU by one number: the index `gpus: [ i ]`, nvidia-smi and nvtop give it, on a stand-in
node whose GPUs sort the other way by uuid than by index (as on the two-H200 run of 2026-11-27,
where the lab's per-GPU figures came out swapped), and where each instance runs.

The stand-ins: a fake `nvidia-smi` on PATH that answers the lab's queries for two GPUs (listed
out of index order, as a program may print them), and Triton's metrics text as the server writes
it (GPUs by uuid only; the lab's instances report their device in the same text)."""

import json
import os
import stat
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from servelab import claims
from servelab.serving import gpu_report
from servelab.triton import gpu_names, gpu_scaling, gpus, triton_config, triton_stats
from servelab.verdicts import triton as triton_checks

# index 0 sorts last by uuid, index 1 first
UUID0, UUID1 = (
    "GPU-f2a1c3d4-0000-1111-2222-333344445555",
    "GPU-0b9e8d7c-6666-7777-8888-999900001111",
)
BUS0, BUS1 = "00000000:1B:00.0", "00000000:89:00.0"


def fake_smi(folder: Path, gpus_csv: str, apps_csv: str = "") -> Path:
    """A nvidia-smi that answers --query-gpu and --query-compute-apps with the rows given."""
    (folder / "gpus.csv").write_text(gpus_csv)
    (folder / "apps.csv").write_text(apps_csv)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *--query-gpu=*) cat "{folder}/gpus.csv" ;;\n'
        f'  *--query-compute-apps=*) cat "{folder}/apps.csv" ;;\n'
        '  *) echo "fake nvidia-smi: $*" ;;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


# nvidia-smi's columns: index, uuid, name, pci.bus_id, memory.used, memory.total, utilization.gpu;
# printed GPU 1 first
TWO_GPUS = (
    f"1, {UUID1}, NVIDIA H200, {BUS1}, 591, 143771, 0\n"
    f"0, {UUID0}, NVIDIA H200, {BUS0}, 4406, 143771, 7\n"
)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """This machine as a two-GPU node: the fake nvidia-smi first on PATH, names asked afresh."""
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    gpu_names.forget()
    claims.RESULTS.clear()
    yield tmp_path
    gpu_names.forget()
    claims.RESULTS.clear()


def metrics(util0: float, util1: float, report: str = "") -> str:
    """Triton's metrics text: GPU 1's lines first and no index anywhere, as Triton writes them."""
    return (
        textwrap.dedent(
            f"""\
        # HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
        # TYPE nv_gpu_utilization gauge
        nv_gpu_utilization{{gpu_uuid="{UUID1}"}} {util1}
        nv_gpu_utilization{{gpu_uuid="{UUID0}"}} {util0}
        # HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
        # TYPE nv_gpu_memory_used_bytes gauge
        nv_gpu_memory_used_bytes{{gpu_uuid="{UUID1}"}} 619708416
        nv_gpu_memory_used_bytes{{gpu_uuid="{UUID0}"}} 4620000000
        """
        )
        + report
    )


def report(instances: list[tuple[str, int, str, int]], visible=(UUID0, UUID1)) -> str:
    """What gpu_report publishes: each instance (name, device_id Triton gave, uuid it runs on,
    pid) and the GPUs its process sees, in CUDA's order."""
    lines = ["# TYPE lab_cuda_device gauge"]
    for name, *_ in instances:
        for i, uuid in enumerate(visible):
            lines.append(
                f'lab_cuda_device{{instance="{name}",gpu_index="{i}",gpu_uuid="{uuid}"}} 1'
            )
    lines.append("# TYPE lab_instance_gpu gauge")
    for name, device_id, uuid, pid in instances:
        lines.append(
            f'lab_instance_gpu{{model="food_classifier",instance="{name}",'
            f'device_id="{device_id}",gpu_uuid="{uuid}"}} {pid}'
        )
    return "\n".join(lines) + "\n"


def test_the_busy_gpu_is_the_one_nvidia_smi_calls_0_whatever_the_uuids_sort_to(node):
    """6.1 on two GPUs: one instance on gpus: [ 0 ] keeps nvidia-smi's GPU 0 busy (7 %) and GPU 1
    idle; the lab's columns say the same, named by nvidia-smi here (no instance reports)."""
    fake_smi(node, TWO_GPUS)
    assert [g.index for g in gpu_names.listing()] == [0, 1]
    scrape = triton_stats.reading(metrics(0.07, 0.0))
    assert sorted(scrape["gpus"])[0] == UUID1  # sorted by uuid, GPU 1 would come first
    assert triton_stats.utilisation(scrape) == {"gpu0_util_pct": 7.0, "gpu1_util_pct": 0.0}
    sampler = triton_stats.Sampler("http://unused")
    sampler.readings = [{"t_s": 0.0, **scrape}, {"t_s": 0.5, **scrape}]
    assert sampler.summary() == {"util_samples": 2, "gpu0_util_pct": 7.0, "gpu1_util_pct": 0.0}
    named = gpu_names.names(scrape)
    assert named.source.startswith("nvidia-smi") and named.index == {UUID0: 0, UUID1: 1}


def test_triton_s_own_instances_name_the_gpus_in_docker_where_no_nvidia_smi_runs(node):
    """The Jupyter container has no nvidia-smi: the index comes from the instances' report in
    Triton's metrics, the server's own CUDA order."""
    text = metrics(0.0, 0.5, report([("food_classifier_0_0", 1, UUID1, 4242)]))
    scrape = triton_stats.reading(text)
    assert scrape["cuda_devices"] == {UUID0: 0, UUID1: 1}
    assert scrape["instances"] == [
        {
            "model": "food_classifier",
            "instance": "food_classifier_0_0",
            "device_id": "1",
            "gpu_uuid": UUID1,
            "pid": 4242,
        }
    ]
    assert triton_stats.utilisation(scrape) == {"gpu0_util_pct": 0.0, "gpu1_util_pct": 50.0}
    assert gpu_names.names(scrape).source.startswith("Triton's instances")
    # the last report stands while a reload has none (the instances finalize, then start again)
    assert triton_stats.utilisation(triton_stats.reading(metrics(0.3, 0.0))) == {
        "gpu0_util_pct": 30.0,
        "gpu1_util_pct": 0.0,
    }


def test_without_any_name_a_gpu_keeps_its_uuid_and_per_gpu_claims_are_not_checked(node):
    scrape = triton_stats.reading(metrics(0.07, 0.0))  # no nvidia-smi on PATH, no report
    row = triton_stats.utilisation(scrape)
    assert set(row) == {"gpu_f2a1c3d4_util_pct", "gpu_0b9e8d7c_util_pct"}

    class Run:
        def __init__(self, row):
            self.row = row

    verdicts = triton_checks.claim_each_gpu(claims.at_most, "c", Run(row), 2, 70)
    assert verdicts == [claims.NOT_CHECKED]


def test_cuda_order_follows_the_bus_and_cuda_visible_devices(node):
    """What `gpus: [ i ]` means in a server started with CUDA_DEVICE_ORDER=PCI_BUS_ID: nvidia-smi's
    order; with CUDA_VISIBLE_DEVICES, the GPUs listed, in the listed order, numbered from 0 (as in a
    container given a subset)."""
    fake_smi(node, TWO_GPUS)
    listed = gpu_names.listing()
    assert [g.uuid for g in gpu_names.cuda_order(listed)] == [UUID0, UUID1]
    assert [g.uuid for g in gpu_names.cuda_order(listed, "1")] == [UUID1]
    assert [g.uuid for g in gpu_names.cuda_order(listed, "1,0")] == [UUID1, UUID0]
    assert [g.uuid for g in gpu_names.cuda_order(listed, UUID1[:12])] == [UUID1]
    assert [g.uuid for g in gpu_names.cuda_order(listed, "0,7,1")] == [UUID0]  # stops at 7
    assert gpu_names.from_smi(listed, {"CUDA_VISIBLE_DEVICES": "1"}) == {UUID1: 0}


def test_a_server_that_sees_another_order_is_caught(node):
    """Triton (by its instances' report) calls GPU 1's uuid 0, as in a container given only the
    second GPU or a server with CUDA_VISIBLE_DEVICES=1,0: the fact that the numbers agree fails,
    and the columns follow Triton, whose numbers are what gpus: [ i ] means."""
    fake_smi(node, TWO_GPUS)
    swapped = report([("food_classifier_0_0", 0, UUID1, 7)], visible=(UUID1, UUID0))
    scrape = triton_stats.reading(metrics(0.0, 0.4, swapped))
    assert triton_stats.utilisation(scrape) == {"gpu0_util_pct": 40.0, "gpu1_util_pct": 0.0}
    assert gpus.names_agree("6.1", scrape=scrape) == claims.FAILS
    gpu_names.forget()
    fake_smi(node, TWO_GPUS)
    agreed = triton_stats.reading(
        metrics(0.07, 0.0, report([("food_classifier_0_0", 0, UUID0, 7)]))
    )
    assert gpus.names_agree("6.1", scrape=agreed) == claims.HOLDS
    frame = gpus.table(scrape=agreed)
    assert frame[["gpu", "uuid", "nvidia_smi_index_here", "instances_on_it"]].values.tolist() == [
        ["GPU 0", UUID0, 0, 1],
        ["GPU 1", UUID1, 1, 0],
    ]


TWO_PER_GPU = [
    ("food_classifier_0_0", 0, UUID0, 101),
    ("food_classifier_0_1", 0, UUID0, 102),
    ("food_classifier_0_2", 1, UUID1, 103),
    ("food_classifier_0_3", 1, UUID1, 104),
]


def apps_csv(pids_on: dict) -> str:
    return "".join(
        f"{pid}, {uuid}, 486, /opt/tritonserver/backends/python/triton_python_backend_stub\n"
        for pid, uuid in pids_on.items()
    )


def test_each_instance_is_seen_where_its_config_put_it(node):
    """Two per GPU, one group listing both GPUs or a group per GPU: the processes report it,
    nvidia-smi sees each on the same GPU, and the claim holds."""
    fake_smi(node, TWO_GPUS, apps_csv({101: UUID0, 102: UUID0, 103: UUID1, 104: UUID1}))
    scrape = triton_stats.reading(metrics(0.1, 0.1, report(TWO_PER_GPU)))
    placed = {"GPU 0": 2, "GPU 1": 2}
    frame = gpus.instance_table("food_classifier", placed, scrape, None, gpu_names.compute_apps())
    assert frame["runs_on"].tolist() == ["GPU 0", "GPU 0", "GPU 1", "GPU 1"]
    assert frame["nvidia_smi_sees_it_on"].tolist() == frame["runs_on"].tolist()
    assert gpus.seen_per_device(frame) == placed
    assert gpus.placement_honoured("6.3", frame, placed) == claims.HOLDS
    # the uneven placement asked for: all four on GPU 0 is not what these processes show
    assert gpus.placement_honoured("6.3", frame, {"GPU 0": 4}) == claims.FAILS
    # Docker: nvidia-smi does not run in the Jupyter container, the processes' report decides
    docker = gpus.instance_table("food_classifier", placed, scrape, None, None)
    assert set(docker["nvidia_smi_sees_it_on"]) == {"not visible here"}
    assert gpus.placement_honoured("6.3", docker, placed) == claims.HOLDS
    assert "not visible here" in claims.RESULTS[-1]["note"]


def test_an_instance_on_another_gpu_than_triton_gave_it_is_caught(node):
    """A model.py that ignores the device Triton gives it (model_instance_device_id) runs every
    instance on CUDA's default GPU 0: the counts per GPU give it away."""
    wrong = [(name, device_id, UUID0, pid) for name, device_id, _, pid in TWO_PER_GPU]
    fake_smi(node, TWO_GPUS, apps_csv({101: UUID0, 102: UUID0, 103: UUID0, 104: UUID0}))
    scrape = triton_stats.reading(metrics(0.2, 0.0, report(wrong)))
    placed = {"GPU 0": 2, "GPU 1": 2}
    frame = gpus.instance_table("food_classifier", placed, scrape, None, gpu_names.compute_apps())
    assert frame["triton_put_it_on"].tolist() == ["GPU 0", "GPU 0", "GPU 1", "GPU 1"]
    assert gpus.placement_honoured("6.3", frame, placed) == claims.FAILS
    assert claims.RESULTS[-1]["numbers"] == (
        "the config = 2 on GPU 0, 2 on GPU 1, their processes = 4 on GPU 0"
    )


def test_cpu_instances_are_shown_and_unreported_gpu_instances_not_checked(node):
    stubs = [{"pid": 5, "instance": "food_classifier_0_0", "cpu_pct": 3.0}]
    frame = gpus.instance_table("food_classifier", {"CPU": 1}, {"instances": []}, stubs, None)
    assert frame["runs_on"].tolist() == ["CPU"]
    assert gpus.placement_honoured("6.3", frame, {"CPU": 1}) is None  # nothing to decide
    assert claims.RESULTS == []
    empty = gpus.instance_table("food_classifier_onnx", {"GPU 0": 2}, {"instances": []})
    assert gpus.placement_honoured("6.4", empty, {"GPU 0": 2}) == claims.NOT_CHECKED
    assert "threads of tritonserver" in claims.RESULTS[-1]["note"]


def test_the_utilisation_law_per_gpu():
    """Four instances on GPU 0 at 400 executions/s, GPU 0 busy 30 %: 0.75 ms of GPU time in each
    10 ms execution; GPU 1 ran none."""
    row = {
        "throughput_infer_s": 400.0,
        "avg_batch_size": 1.0,
        "execution_ms": 10.0,
        "gpu0_util_pct": 30.0,
        "gpu1_util_pct": 0.5,
    }
    laws = gpu_scaling.laws_per_gpu(row, {"GPU 0": 4}, 2)
    assert laws.loc["GPU 0", "gpu_ms_per_execution"] == pytest.approx(0.75)
    assert laws.loc["GPU 0", "gpu_share_of_execution"] == pytest.approx(0.075)
    assert laws.loc["GPU 1", "executions_s"] == 0 and pd.isna(
        laws.loc["GPU 1", "gpu_ms_per_execution"]
    )
    even = gpu_scaling.laws_per_gpu(row, {"GPU 0": 2, "GPU 1": 2}, 2)
    assert even["executions_s"].tolist() == [200.0, 200.0]


class FakeRun:
    def __init__(self, throughput, **row):
        self.row = {"throughput_infer_s": throughput, **row}
        self.throughput = claims.Measured(throughput, 0.97 * throughput, 1.03 * throughput)


def test_what_a_second_gpu_buys_is_claimed_on_the_same_instances(node):
    row = dict(avg_batch_size=1.0, execution_ms=10.0, gpu0_util_pct=30.0, gpu1_util_pct=0.0)
    one = FakeRun(400.0, instances=4, busy_U=0.99, **row)
    two, faster = FakeRun(410.0, instances=4), FakeRun(700.0, instances=4)
    assert triton_checks.second_gpu_buys("6.3", one, two, 2) == claims.HOLDS
    assert "GPU 0's share of an execution = 0.075" in claims.RESULTS[-1]["numbers"]
    assert triton_checks.second_gpu_buys("6.3", one, faster, 2) == claims.FAILS
    assert triton_checks.second_gpu_buys("6.3", one, two, 1) == claims.NOT_CHECKED
    assert triton_checks.second_gpu_buys("6.3", None, two, 2) == claims.NOT_CHECKED  # not run


class FakePbUtils:
    """pb_utils' custom metrics, recorded as Triton's metrics text would show them."""

    lines: list = []

    class MetricFamily:
        GAUGE = "gauge"

        def __init__(self, name, description, kind):
            self.name = name

        def Metric(self, labels):  # noqa: N802 - pb_utils' spelling
            family = self

            class Metric:
                def set(self, value):
                    shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
                    FakePbUtils.lines.append(f"{family.name}{{{shown}}} {value}")

            return Metric()


def test_what_an_instance_publishes_is_what_the_lab_reads(node, monkeypatch):
    """gpu_report's labels, read back by triton_stats.reading: the contract between model.py
    (in Triton's process) and the notebook (anywhere)."""
    assert gpu_report.DEVICE_METRIC == gpu_names.DEVICE_METRIC
    assert gpu_report.INSTANCE_METRIC == gpu_names.INSTANCE_METRIC
    monkeypatch.setattr(gpu_report, "cuda_uuids", lambda: [UUID0, UUID1])
    FakePbUtils.lines = []
    args = {
        "model_name": "food_classifier",
        "model_instance_name": "food_classifier_0_1",
        "model_instance_device_id": "1",
    }
    kept = gpu_report.Report(FakePbUtils, args, "cuda:1")
    scrape = triton_stats.reading(metrics(0.0, 0.2, "\n".join(FakePbUtils.lines) + "\n"))
    assert scrape["cuda_devices"] == {UUID0: 0, UUID1: 1}
    (inst,) = scrape["instances"]
    assert (inst["device_id"], inst["gpu_uuid"], inst["pid"]) == ("1", UUID1, os.getpid())
    kept.close()
    FakePbUtils.lines = []
    gpu_report.Report(FakePbUtils, args, "cpu")  # a CPU instance publishes nothing
    assert FakePbUtils.lines == []
    assert gpu_report.cuda_index("cuda") == 0 and gpu_report.cuda_index("cpu") is None


def test_triton_numbers_gpus_in_pci_bus_order_everywhere():
    """`gpus: [ i ]` is CUDA's device i: local mode's server and the Docker stack's both run with
    CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's order (CUDA's default leaves equal GPUs in an
    unspecified order)."""
    from labstack import triton_local

    services = yaml.safe_load(Path("docker/services.yaml").read_text())["services"]
    assert services["triton_server"]["environment"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    try:
        env = triton_local.server_env({"PATH": os.environ["PATH"]})
    except triton_local.TritonNotInstalled:
        pytest.skip("no Triton in this environment")
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


UNEVEN = {  # 6.3c on the class's 2-GPU node, all of 6.3a's four instances on GPU 0: text -> passes
    "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]": True,
    "instance_group [ {count: 2, kind: KIND_GPU, gpus: [0]}, "
    "{count: 2, kind: KIND_GPU, gpus: [0]} ]": True,
    "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0, 1 ] } ]": False,
    "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 1 ] } ]": False,
}


@pytest.mark.parametrize("text, passes", UNEVEN.items())
def test_the_uneven_placement_is_judged_by_where_triton_puts_it(text, passes):
    from servelab import exercises
    from servelab.exercises import NotYet, config_edits
    from servelab.triton import instances

    def check():
        needs = exercises.on_first_gpu(4, 2)
        return config_edits.config_fragment(text, "6.3", "all on GPU 0", needs)

    if passes:
        check()
    else:
        with pytest.raises(NotYet, match="not where the step puts them"):
            check()
    # both spellings of 6.3a's placement put the same instances, and say so
    assert gpus.both_forms(2, 2) is True
    assert instances.placement(instances.instance_group(2, 2), 2) == {"GPU 0": 2, "GPU 1": 2}


def test_the_reference_runs_placement_part_loads_both_forms_and_reports_them(tmp_path):
    """maintainers/reference/placement.py's configs: one instance on GPU 0, two per GPU as one group
    and as a group per GPU (the same placement), all on GPU 0; its page section from a record."""
    from maintainers.reference import placement, run_reference
    from servelab.triton import instances

    forms = placement.forms(2)
    placed = {name: instances.placement(text, 2) for name, text in forms.items()}
    assert placed == {
        "one instance on GPU 0": {"GPU 0": 1},
        "two per GPU, one group": {"GPU 0": 2, "GPU 1": 2},
        "two per GPU, a group per GPU": {"GPU 0": 2, "GPU 1": 2},
        "all on GPU 0": {"GPU 0": 4},
    }
    folder = tmp_path / "results" / "placement"
    folder.mkdir(parents=True)
    row = {"instance": "food_classifier_0_0", "triton_put_it_on": "GPU 0", "runs_on": "GPU 0"}
    record = {
        "cuda_orders": [{"environment": {}, "cuda_order": [UUID0], "predicted": [UUID0]}],
        "triton_gpus": [{"gpu": "GPU 0", "uuid": UUID0, "nvidia_smi_index_here": 0}],
        "placements": [
            {"name": "x", "fragment": "f", "seconds": 1.0, "instances": [row], "memory_mib": {}}
        ],
    }
    (folder / "placement.json").write_text(json.dumps(record))
    text = "\n".join(run_reference.placement_lines(folder))
    assert "| none | GPU-f2a1c3d4 | GPU-f2a1c3d4 |" in text and "food_classifier_0_0" in text
    assert run_reference.placement_lines(tmp_path) == []  # a page without the part


FACTS = Path(__file__).resolve().parent.parent / "docs/results/h200x2/gpu_facts"


def test_the_two_h200s_numbered_their_gpus_as_gpu_names_predicts():
    """The committed facts of the two-GPU machine: from its nvidia-smi listing, cuda_order gives
    every order CUDA gave there; the process on cuda:1 was nvidia-smi's GPU 1; the page quotes
    the recorded uuids and buses."""
    facts = json.loads((FACTS / "gpu_facts.json").read_text())
    listed = [gpu_names.Gpu(**g) for g in facts["nvidia_smi"]]
    assert [g.name for g in listed] == ["NVIDIA H200", "NVIDIA H200"]
    for entry in facts["cuda_orders"]:
        visible = entry["environment"].get("CUDA_VISIBLE_DEVICES")
        assert [g.uuid for g in gpu_names.cuda_order(listed, visible)] == entry["cuda_order"]
    held = facts["process_on_last_gpu"]
    assert held["nvidia_smi_index_of_that_uuid"] == [1] and facts["agrees"]
    page = (FACTS / "README.md").read_text()
    for g in listed:
        assert f"`{g.uuid[:12]}-...`" in page and f"`{g.bus_id}`" in page
    assert f"holding {held['nvidia_smi_sees'][0]['used_mib']:.0f} MiB" in page


# ---------------------------------------------------------------- instance-group changes

PER_GPU = (
    "instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0 ] }, "
    "{ count: 2, kind: KIND_GPU, gpus: [ 1 ] } ]"
)
ALL_ON_GPU0 = "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]"


@pytest.fixture
def standin(node, tmp_path):
    """A repository with food_classifier as two per GPU, a group per GPU; returns a function that
    starts the stand-in Triton on it (tests/triton_standin.py)."""
    from tests.triton_standin import FakeTriton

    folder = tmp_path / "repo" / "food_classifier"
    folder.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(f'name: "food_classifier"\nbackend: "python"\n{PER_GPU}\n')
    return lambda **behaviour: FakeTriton(tmp_path / "repo", "food_classifier", **behaviour)


def test_a_changed_instance_group_ends_with_exactly_the_instances_its_config_names(standin):
    """The two-H200 run of 2026-11-28: after "a group per GPU", "all on GPU 0" left the old
    instance food_classifier_1_0 running on GPU 1 when the lab listed them. Triton finalizes an
    unloaded model's instances one process after another, after the unload has answered; here
    food_classifier_1_0 outlives the unload by 0.5 s. The lab's edit waits until the index no
    longer says UNLOADING before it loads, so the listing shows the four new instances alone."""
    with standin(linger={"food_classifier_1_0": 0.5}) as triton:
        repo = triton.repo
        result = triton_config.edit("food_classifier", ALL_ON_GPU0, repo=repo, url=triton.url)
        assert result.ok, result.error
        events = [what for _, what in triton.events]
        ended = events.index("ended food_classifier_1_0 (pid 1002)")
        assert events[ended + 1] == "load"  # the new instances start once the old one is gone
        frame = gpus.where_instances_run(
            "6.3d", "food_classifier", 2, triton.url, triton.metrics_url, settle_s=0.1
        )
    assert claims.RESULTS[-1]["verdict"] == claims.HOLDS
    assert frame["runs_on"].tolist() == ["GPU 0"] * 4 and min(frame["pid"]) > 1003


def test_an_unload_answers_once_the_old_instances_are_gone(standin):
    """6.3a's form: the student unloads, then loads with the client library. unload_model
    returns when Triton's index says the old instances are finalized, not when the model stops
    answering READY."""
    with standin(linger={"food_classifier_1_1": 0.5}) as triton:
        start = time.monotonic()
        assert triton_config.unload_model("food_classifier", triton.url) == "unloaded"
        assert time.monotonic() - start >= 0.45
        assert triton_config.model_state("food_classifier", triton.url) == "UNAVAILABLE"
        assert "lab_instance_gpu" not in triton.metrics().split("gauge", 2)[-1]


def test_an_old_instance_kept_after_a_reload_is_caught(standin):
    """A server that keeps an old instance after the reload and whose index does not say so: the
    listing waits for the config's instances, then the claim says DOES NOT HOLD, with the
    instance that stayed on GPU 1."""
    with standin(linger={"food_classifier_1_0": 30.0}, index_says_unloading=False) as triton:
        triton_config.edit("food_classifier", ALL_ON_GPU0, repo=triton.repo, url=triton.url)
        start = time.monotonic()
        frame = gpus.where_instances_run(
            "6.3d", "food_classifier", 2, triton.url, triton.metrics_url, settle_s=0.5
        )
        assert time.monotonic() - start >= 0.5  # it waited for the listing to settle
    assert claims.RESULTS[-1]["verdict"] == claims.FAILS
    assert claims.RESULTS[-1]["numbers"] == (
        "the config = 4 on GPU 0, their processes = 4 on GPU 0, 1 on GPU 1"
    )
    assert "food_classifier_1_0" in frame["instance"].tolist()


# ---------------------------------------------------------------- the GPUs a process may use


def test_a_server_given_one_gpu_of_two_counts_one(node, monkeypatch):
    """CUDA_VISIBLE_DEVICES=1 on the two-GPU node: Triton's metrics (it collects the GPUs its
    process sees), else its instances' report, else nvidia-smi through the variable, say 1."""
    fake_smi(node, TWO_GPUS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    served = {"instance_group": [{"kind": "KIND_GPU", "count": 1, "gpus": [0]}]}
    monkeypatch.setattr(triton_config, "served_config", lambda *a, **k: served)

    def count(text: str) -> int:
        monkeypatch.setattr(triton_stats, "_metrics", lambda url: triton_stats.parse_metrics(text))
        return triton_stats.gpu_count("http://unused", "http://unused")

    one_gpu = f'nv_gpu_utilization{{gpu_uuid="{UUID1}"}} 0.1\n'
    assert count(one_gpu) == 1
    assert count(report([("food_classifier_0_0", 0, UUID1, 7)], visible=(UUID1,))) == 1
    assert count("") == 1  # nvidia-smi lists two; the variable gives the server one
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert count("") == 2


def test_a_gpu_seen_through_cuda_visible_devices_is_named_both_ways(node, monkeypatch):
    """The server's GPU 0 is nvidia-smi's GPU 1: the fact that the numbers agree holds (it is the
    first GPU of the list), and every table writes it "GPU 0 (nvidia-smi's GPU 1)"."""
    fake_smi(node, TWO_GPUS, apps_csv({7: UUID1}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    mine = report([("food_classifier_0_0", 0, UUID1, 7)], visible=(UUID1,))
    scrape = triton_stats.reading(metrics(0.0, 0.3, mine))
    assert gpus.names_agree("6.1", scrape=scrape) == claims.HOLDS
    said = claims.RESULTS[-1]
    assert said["claim"].endswith("is the i-th GPU of CUDA_VISIBLE_DEVICES=1")
    assert said["numbers"] == "GPU 0 in Triton = nvidia-smi's 1"
    assert "GPU 0 (nvidia-smi's GPU 1)" in said["note"]
    assert gpus.table(scrape=scrape)["gpu"].tolist()[0] == "GPU 0 (nvidia-smi's GPU 1)"
    apps = gpu_names.compute_apps()
    frame = gpus.instance_table("food_classifier", {"GPU 0": 1}, scrape, None, apps)
    assert frame[["runs_on", "nvidia_smi_sees_it_on"]].values.tolist() == [
        ["GPU 0", "GPU 0 (nvidia-smi's GPU 1)"]
    ]
    assert gpus.placement_honoured("6.1", frame, {"GPU 0": 1}) == claims.HOLDS
    # the same uuid under another subset than the server's own is still caught
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert gpus.names_agree("6.1", scrape=scrape) == claims.FAILS


def test_a_container_given_the_nodes_second_gpu_names_it_by_the_nodes_number(node, monkeypatch):
    """NVIDIA_VISIBLE_DEVICES=1: inside the container nvidia-smi lists one GPU, index 0; the node's
    nvidia-smi and nvtop call it 1, and the lab says so beside `gpus: [ 0 ]`."""
    fake_smi(node, f"0, {UUID1}, NVIDIA H200, {BUS1}, 591, 143771, 0\n")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "1")
    named = gpu_names.names({})
    assert named.index == {UUID1: 0} and named.smi == {UUID1: 1}
    assert named.title(UUID1) == "GPU 0 (nvidia-smi's GPU 1)"
    assert gpu_names.visible() == {"NVIDIA_VISIBLE_DEVICES": "1"}
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    gpu_names.forget()
    assert gpu_names.visible() == {} and gpu_names.names({}).title(UUID1) == "GPU 0"
