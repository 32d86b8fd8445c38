"""What runs the lab, not what the notebooks teach: the local-mode launcher (`make up`), the local
Triton server's environment, the model artifacts (`make artifacts`), the notebooks' two editions
(`make notebooks`, `make solutions`), the headless notebook runner and `make lab`."""
