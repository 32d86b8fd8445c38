"""What runs inside the services and Triton's models: the two model runtimes (PyTorch, ONNX
Runtime), the tuned PyTorch runtime of notebook 7, the raw-model limit, the FastAPI app both
FastAPI services serve, the Flask UI's tritonclient per thread and its guard against the requests
that crash Triton 2.51, the watchdog that keeps Triton's models serving (local mode and the Triton
container), and Ray kept on the loopback address for local mode's cluster."""
