"""Reliability and safety of the lab's services, measured: fuzzing, bounded soak, faults, safe
defaults.

    python -m maintainers.reliability    # everything; writes docs/reliability.md (make reliability)
    python -m maintainers.reliability --only soak --soak-seconds 300 \
        --out results/reliability_soak.md                                        # make soak

One module per job: corpus (hand-made and generated images), fuzz_decoding / fuzz_fastapi /
fuzz_flask / fuzz_triton (bad input per service), soak, faults / faults_triton, safe_defaults,
report (the Markdown); common holds the verdicts and counters, procs starts real service processes.
The tests (tests/test_fuzz_*.py, test_soak.py, test_faults.py, test_safe_defaults.py) call the same
functions with smaller budgets and assert on what they return.
"""
