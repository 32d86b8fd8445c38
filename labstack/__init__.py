"""What runs the lab, not what the notebooks teach: the local-mode launcher (`make up`) and its
parts, the local Triton server's environment, the model artifacts (`make artifacts`), the
notebooks' two editions (`make notebooks`, `make solutions`), the headless notebook runner and
`make lab`, the class edition, notebook 8's Model Analyzer command and the instructors' batch-size
check (batch_switch.py, run in the lab's Jupyter container). The maintainers' tooling builds on
this package from maintainers/; nothing here imports it."""
