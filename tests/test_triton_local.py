"""Local-mode Triton environment: the Python-backend stubs must import a numpy < 2.

(Seen on the CPU machine with a Python 3.12 venv and on the H100: with numpy 2.x the pytriton 0.7.0
stubs load, then corrupt every BYTES input and the stub process dies on the first request.)
"""
import pytest

from servelab import triton_local


def test_the_lab_environment_gives_the_stubs_numpy_1(built_artifacts):
    env = triton_local.server_env()
    assert triton_local.check_stub_numpy(env).startswith("1.")


def test_numpy_2_for_the_stubs_is_refused_with_the_fix(tmp_path, monkeypatch):
    fake = tmp_path / "numpy"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '2.3.5'\n")
    monkeypatch.setenv("LAB_TRITON_PYTHONPATH", str(tmp_path))
    env = triton_local.server_env()
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)  # first, for the stubs only
    with pytest.raises(triton_local.TritonNotInstalled, match=r"numpy 2\.3\.5.*numpy < 2.*LAB_TRITON_PYTHONPATH"):
        triton_local.check_stub_numpy(env)

