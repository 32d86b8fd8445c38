"""The lease plan's rules: minutes per thing a median student does, and each wait with its source.

These are the plan's estimates, each stated once here and printed on docs/timing_plan.md; the
machine minutes are the only figures a machine measured (machine.py). The walkthrough
(walkthrough.py) times the same notebooks by other means, to check these.
"""

from __future__ import annotations

from dataclasses import dataclass

# Adults read non-fiction silently at about 238 words a minute (Brysbaert, "How many words do we
# read per minute?", J. Memory and Language 109, 2019); a lab text dense with numbers and names, to
# be acted on, more slowly. Code is read line by line, for what each call does.
READING_WPM = 150
CODE_LINES_PER_MIN = 15  # 4 s a line: what the line calls, not how that works
SKIM_WPM = 700  # in the lease, the prose read before: finding the step again

# minutes per unit of each step (kind -> (minutes per step, minutes per unit of its amount))
MINUTES: dict[str, tuple[float, float]] = {
    # prepare: what the student writes, each with its check run and one fix
    "perf_line": (3.0, 0.0),
    "curl_line": (2.0, 0.0),
    "config_fragment": (3.0, 0.0),
    "result": (2.5, 0.0),  # one call or value (a tritonclient call, a request body)
    "function": (3.0, 0.6),  # plus each line of its body after the first
    "other exercise": (3.0, 0.0),
    "prediction": (1.5, 0.0),  # a number and why
    "question": (0.0, 2.0),  # a question in the notebook's prose, per question asked
    "try it": (4.0, 0.0),  # a few lines of your own, written before, run in the lease
    # review: what is judged on the student's own rows
    "answer": (0.0, 2.0),  # "What do you see, and why?", per question asked
    "decision": (2.5, 0.0),  # a choice read off your own rows
    "hand-in": (0.0, 3.0),  # per hand-in question: open, on the whole notebook
    # the lease (and the cells of the other passes)
    "run cell": (0.2, 0.0),  # run a cell, glance at what it printed
    "run cell offline": (0.1, 0.0),  # in prepare or review: Run All, mostly
    "open notebook": (0.5, 0.0),  # open it in JupyterLab (and set LAB_PASS outside the lease)
    "observation": (0.5, 0.0),  # a number read off the node's screen, typed
    "host command": (1.0, 0.0),  # a command a cell prints: copy, paste on the node, come back
    "terminal command": (0.0, 0.5),  # per command line of a ```bash block, pasted and read
    "ssh login": (2.0, 0.0),  # the printed ssh command in a terminal on your computer
    "tunnel": (2.0, 0.0),  # an SSH tunnel from your computer, then the local URL
    "swagger": (3.0, 0.0),  # /docs: expand, Try it out, a body, Execute, read the answer
    "browser page": (2.0, 0.0),  # open a page of the node, upload a photo, read it
    "jupyter url": (2.0, 0.0),  # print the lab's Jupyter URL with its token, open it
    "node terminal": (2.0, 0.0),  # a second SSH session on the node, a tool left running
    "nvidia-smi": (1.0, 0.0),  # look at the node's GPUs in that terminal
    "editor": (3.0, 0.5),  # open the file, edit, save, run the check; per line typed
    "clean-up": (1.0, 0.0),  # set the flag, run the delete cell
}
PASS_OF_KIND = {  # where each kind of step is done (others: where their cell runs)
    "answer": "review",
    "decision": "review",
    "hand-in": "review",
    "observation": "measure",
}


@dataclass(frozen=True)
class Wait:
    """A wait the lease pays that the reference run did not measure."""

    name: str
    notebook: str
    anchor: str  # a regex found in the notebook's class path: where the wait happens
    minutes: float  # the plan's figure: a median node, the work alone
    low: float
    high: float
    source: str
    with_image: float  # what is left of it on the class's prepared image (instructors.md)
    every: bool = False  # at each match of the anchor, not only the first
    part: str = ""  # a part of the background build (docker/build_images.sh), waited for here
    downloads: bool = False  # downloads while the student waits: shares the node's network


# Where notebook 2 starts docker/build_images.sh in the background (a regex of its class path).
BACKGROUND_NOTEBOOK = "02_provision"
BACKGROUND_START = r"docker/build_images\.sh start"
BACKGROUND_NAME = "the class's images, built in the background from here (docker/build_images.sh)"
# The overlap rule, stated once; both estimates apply it (background.py), each with its own
# minutes for the parts, and the plan's page prints it.
BACKGROUND_RULE = (
    "Background work is counted where it truly costs the student. Notebook 2 starts "
    "docker/build_images.sh once the host is set up; it builds its parts one after another, in "
    "the order the notebooks need them (the FastAPI stack, the ONNX image, the Triton stack), "
    "while the student goes on. A part's minutes (the waits marked 'in the background') are its "
    "work alone, its images built side by side as `docker compose build` builds a stack (the "
    "build's own contention is in them). Each minute the student spends on another step "
    "(reading, typing, a browser, a GPU run) is a minute of the build; at a part's `wait` the "
    "lease pays only what is left of that part and of the parts before it. Contention, assumed: "
    "(1) the network: the node has one link, and a wait that downloads beside the build (the "
    "model files' pip) shares it with the build's downloads, which are then the FastAPI images' "
    "packages (pip inside the build, also one download at a time): while both run, each gets "
    "half (TCP's congestion control shares a bottleneck fairly between flows: Chiu and Jain, "
    "'Analysis of the increase and decrease algorithms for congestion avoidance', 1989), so that "
    "wait takes up to twice as long and the build falls behind by as much as it gave up "
    "(processor sharing); both estimates take the whole of such a wait as download, an upper "
    "bound. Against a Docker pull, which opens up to 3 layer downloads at once (dockerd's "
    "default max-concurrent-downloads), one pip download would get less: the build reaches "
    "NVIDIA's image after the model files in every estimate here (a test keeps it so). (2) The "
    "CPU is not shared: the build and pip use a few cores of a node with two multi-core Xeon "
    "sockets (Chameleon's hardware catalogue for gpu_p100; not measured here) and the student's "
    "steps use none; a GPU run beside the build would share the CPU and the disk with it, so the "
    "plan shows when the build ends against notebook 4's first run."
)


WAITS = (
    Wait(
        "bare-metal boot",
        "02_provision",
        r"chi_servers\.wait_for_boot\(node,",
        12.0,
        10.0,
        20.0,
        "python-chi 1.2.10, chi/server.py, wait_for_active: 'typically 10 minutes ... up to 20'",
        12.0,
    ),
    Wait(
        "SSH after the boot",
        "02_provision",
        r"chi_servers\.wait_for_ssh\(node\)",
        3.0,
        1.0,
        10.0,
        "notebook 2: sshd and cloud-init 'a few minutes after the server is ACTIVE' (estimate)",
        3.0,
    ),
    Wait(
        "host setup (docker/setup_host.sh)",
        "02_provision",
        r"docker/setup_host\.sh\"\)",
        6.0,
        3.0,
        12.0,
        "estimate: cloud-init and automatic updates let go of apt, then Docker Engine, the "
        "NVIDIA container toolkit and nvtop from apt, and a container's nvidia-smi",
        0.5,
        downloads=True,
    ),
    Wait(
        "model files (make artifacts-only)",
        "02_provision",
        r"make artifacts-only",
        3.0,
        2.0,
        6.0,
        "estimate: a venv with CPU-only torch (~200 MB download); the build itself took 15 s on "
        "the GPU reference (docs/results/h100/04_fastapi_benchmarks/notes.md)",
        0.2,
        downloads=True,
    ),
    Wait(
        "the FastAPI stack's images (in the background)",
        "03_fastapi_setup",
        r"build_images\.sh wait fastapi",
        4.5,
        2.7,
        11.5,
        "estimate: measured here with local package mirrors, FastAPI-pt 82 s, Jupyter 16 s, "
        "Flask 4 s (shared/DOCKER_LOCAL.md); a node also downloads ~2.8 GB of CUDA torch wheels "
        "and the Jupyter base image",
        0.0,
        part="fastapi",
    ),
    Wait(
        "the FastAPI stack started (`up --build --wait`)",
        "03_fastapi_setup",
        r"docker-compose-fastapi\.yaml up -d --build --wait",
        0.5,
        0.3,
        1.5,
        "estimate: `up --wait` took 12 s here and the model loads before the service is healthy; "
        "`--build` finds every image in the build cache",
        0.5,
    ),
    Wait(
        "the ONNX FastAPI image (in the background)",
        "04_fastapi_benchmarks",
        r"services\.use_fastapi_backend\(\"onnx\"\)",
        1.5,
        1.0,
        4.0,
        "estimate: FastAPI-onnx built in 79 s here (shared/DOCKER_LOCAL.md), onnxruntime-gpu "
        "(~200 MB) downloaded on a node",
        0.0,
        part="onnx",
    ),
    Wait(
        "FastAPI container recreated (each switch)",
        "04_fastapi_benchmarks",
        r"services\.use_fastapi_backend\(",
        0.5,
        0.3,
        1.5,
        "estimate: `up --wait` of one service took 12 s here; the model loads before it is healthy",
        0.5,
        every=True,
    ),
    Wait(
        "the Triton stack's images: NVIDIA's image pulled, built (in the background)",
        "05_triton_setup",
        r"build_images\.sh wait triton",
        8.0,
        4.5,
        19.0,
        "estimate: nvcr.io/nvidia/tritonserver:24.10-py3 is ~15.5 GB on disk "
        "(triton-inference-server/server#7474) to download and unpack; the build adds CUDA torch "
        "(Triton 90 s here on a stand-in base, shared/DOCKER_LOCAL.md)",
        0.0,
        part="triton",
    ),
    Wait(
        "the Triton stack started, both models loaded",
        "05_triton_setup",
        r"docker-compose-triton\.yaml up -d --build --wait",
        1.0,
        0.5,
        3.0,
        "estimate: Triton loads both models before it is healthy; `--build` finds every image in "
        "the build cache",
        1.0,
    ),
    Wait(
        "Flask container recreated (each switch)",
        "06_triton_benchmarks",
        r"services\.use_flask_triton_model\(",
        0.3,
        0.2,
        1.0,
        "estimate: `up --wait` of one service took 12 s here (shared/DOCKER_LOCAL.md)",
        0.3,
        every=True,
    ),
)
# The node's reference is 2x P100; machine minutes come from an H100 host. perf_analyzer measures
# in fixed windows until they agree, so a run's duration depends on the windows more than on the
# device (a slower device gives other numbers in about the same minutes).
