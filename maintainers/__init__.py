"""The maintainers' wing: what the maintainers and a TA run, never the class (README.md here).

    reference/    the reference runs of the solved notebooks and their pages in docs/results/
                  (`python maintainers/reference/run_reference.py --out PAGE --report`)
    reliability/  fuzzing, soak, faults, safe defaults (`make reliability`, `make soak`)
    timing/       the lease plan, docs/timing_plan.md (`make timing`)
    figures/      the figures the texts quote from the pages (`make figures`)
    experiments/  one-off measurements behind a page or a choice (`make bench`)

Each room builds on labstack and servelab, never the other way (pyproject.toml's import-linter
contracts): the lab's runtime and the class edition import nothing from here.
"""
