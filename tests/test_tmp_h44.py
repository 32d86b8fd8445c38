import pandas as pd
import pytest
from test_notebooks import run_launcher, run_solved, stack_env, up_with_triton, assert_stops_at_first_exercise


@pytest.mark.slow
@pytest.mark.timeout(2700)
def test_nb6_only(tmp_path, built_artifacts):
    state, results = tmp_path / "lab", tmp_path / "results"
    env = stack_env(tmp_path)
    up_with_triton(env)
    try:
        run_solved("05_triton_setup", tmp_path, env)
        assert_stops_at_first_exercise("06_triton_benchmarks", tmp_path, env)
        run_solved("06_triton_benchmarks", tmp_path, env)
    finally:
        run_launcher(state, "down", extra_env=env)
        import shutil
        shutil.copytree(tmp_path, "/tmp/h44_nb6", dirs_exist_ok=True)
    claims = pd.read_csv(results / "triton" / "claims.csv")
    print(claims.to_string())
