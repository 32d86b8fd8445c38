"""One-off measurements behind a reference page or a choice: `make bench` (bench_fastapi.py) and
notebook 8's ensemble comparison repeated (ensemble_compare.py)."""
