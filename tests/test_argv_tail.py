"""servelab/serving/argv_tail.py: a program receives words in its argv that its command line
(/proc/<pid>/cmdline, every local user's to read) and its environment never show; how
perf_analyzer gets the node's secret for Triton's shared-memory API (perf.run_line; its run
against a real Triton: tests/test_triton_server.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from servelab.serving import argv_tail

pytestmark = pytest.mark.skipif(
    not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler"
)

SECRET = "s3cr3t-0123456789abcdef"
PROGRAM = (
    "import json, sys, time\n"
    "seen = {'argv': sys.argv[1:], 'cmdline': open('/proc/self/cmdline', 'rb').read().decode(),"
    " 'environ': open('/proc/self/environ', 'rb').read().decode(errors='replace')}\n"
    "print(json.dumps(seen))\n"
)


def test_the_words_reach_main_and_no_command_line_or_environment_shows_them():
    env, why_not = argv_tail.environment(dict(os.environ), ["-H", f"lab-admin-key:{SECRET}"])
    assert why_not == ""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "first"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["argv"] == ["first", "-H", f"lab-admin-key:{SECRET}"]
    assert SECRET not in seen["cmdline"] and "first" in seen["cmdline"]
    assert SECRET not in seen["environ"]  # blanked in place before main() ran
    assert "LD_PRELOAD" not in json.dumps(seen["argv"])


def test_the_library_is_built_once_and_only_ours_is_used(tmp_path, monkeypatch):
    monkeypatch.setattr(argv_tail, "LAB_DIR", tmp_path)
    first = argv_tail.library()
    assert first.parent == tmp_path / "bin" and oct(first.parent.stat().st_mode)[-3:] == "700"
    assert argv_tail.library() == first and first.stat().st_mode & 0o022 == 0
    first.chmod(0o777)  # writable by others: whoever could replace it would read the tail
    with pytest.raises(OSError, match="not this user's own"):
        argv_tail.library()
    env, why_not = argv_tail.environment({}, ["-H", "x:y"])
    assert why_not and env == {}


def test_without_a_compiler_it_says_why_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(argv_tail, "LAB_DIR", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    env, why_not = argv_tail.environment({"A": "1"}, ["-H", "x:y"])
    assert "no C compiler" in why_not and env == {"A": "1"}
