"""The test tiers (README, "Tests"; tests/conftest.py): every test file has one tier by its name,
each tier has its make target, and .ci/run runs every tier but the extended one (maintainers
run it: it would take CI further past its 25 minutes), which README says."""

import importlib.util
import re

from servelab.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def _conftest():
    """tests/conftest.py as a module of its own (tests/docker/ has a conftest.py too)."""
    spec = importlib.util.spec_from_file_location("tiers_of_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_test_file_is_in_one_tier_and_every_name_pattern_is_used():
    conftest = _conftest()
    files = sorted(TESTS.rglob("test_*.py"))
    tiers = {f.relative_to(TESTS).as_posix(): conftest.tier_of(f) for f in files}
    assert set(tiers.values()) == {"core", "chameleon", "extended", "docker"}
    for tier, patterns in conftest.TIERS.items():
        for pattern in patterns:  # a pattern that matches nothing is a file renamed away
            assert any(f.match(pattern) for f in files), f"{tier}: no file matches {pattern}"
    # the files the tiers were made for, where they were put
    assert tiers["test_chi_contract.py"] == "chameleon"
    assert all(t == "chameleon" for f, t in tiers.items() if f.startswith("test_chameleon_"))
    for name in ("test_notebook_08.py", "test_notebook_09.py", "test_faults.py"):
        assert tiers[name] == "extended", name
    assert tiers["test_notebooks.py"] == "core"  # the solved notebooks 3-6 are make test's
    for name in ("test_ray_security.py", "test_triton_crashes.py", "test_decode_fuzz.py"):
        assert tiers[name] == "core", name  # the security round's tests run in CI
    assert all(t == "docker" for f, t in tiers.items() if f.startswith("docker/"))


def test_each_tier_has_its_target_and_ci_runs_all_but_the_extended_one():
    makefile = (REPO_ROOT / "Makefile").read_text()
    ci = (REPO_ROOT / ".ci/run").read_text()
    # the fast tier: every test not marked slow, on every core (pytest-xdist)
    fast = r'^test-fast:.*\n\t\$\(PY\) -m pytest -m "not slow" -p xdist\.plugin -n auto\b'
    assert re.search(fast, makefile, re.M)
    for target, tier in (
        ("test", "core"),
        ("test-chameleon", "chameleon"),
        ("test-extended", "extended"),
        ("test-docker", "docker"),
    ):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert recipe and f"--tier={tier}" in recipe[1], target
        in_ci = re.search(rf"^\s*tier {target}$", ci, re.M)
        assert bool(in_ci) == (tier != "extended"), f".ci/run and make {target} disagree"
