"""The FastAPI inference service with the PyTorch runtime (notebook 4).

    uvicorn fastapi_pt.app:app --port 8000          # local mode: make up
    POST /predict  {"image": "<base64 JPEG/PNG>"}
                   ->  {"prediction": "<class>", "probability": 0..1}
    GET  /health   200 once the model is loaded;   GET /docs  Swagger UI

This service and fastapi_onnx/ differ in one thing, the runtime, which is what notebook 4
compares. So this file only chooses it; everything else is shared, written once:
- the runtime, TorchClassifier: servelab/serving/runtimes.py (Triton's Python model uses it too)
- the HTTP layer, the same routes, limits and error messages for both services:
  servelab/serving/inference_api.py
- pre- and post-processing (decode, resize, normalise; softmax, class): servelab/food11.py
Image: docker/Dockerfile.fastapi, target `pt`; packages: requirements.txt here.
"""

from servelab.serving.inference_api import create_app

app = create_app("pytorch")
