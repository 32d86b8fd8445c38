"""The FastAPI inference service with the ONNX Runtime runtime (notebook 4).

    uvicorn fastapi_onnx.app:app --port 8000        # local mode: FASTAPI_BACKEND=onnx make up
    POST /predict  {"image": "<base64 JPEG/PNG>"}
                   ->  {"prediction": "<class>", "probability": 0..1}
    GET  /health   200 once the model is loaded;   GET /docs  Swagger UI

This service and fastapi_pt/ differ in one thing, the runtime, which is what notebook 4
compares. So this file only chooses it; everything else is shared, written once:
- the runtime, OnnxClassifier (an ONNX Runtime session on model.onnx, exported from the same
  PyTorch model): servelab/serving/runtimes.py
- the HTTP layer, the same routes, limits and error messages for both services:
  servelab/serving/inference_api.py
- pre- and post-processing (decode, resize, normalise; softmax, class): servelab/food11.py
Image: docker/Dockerfile.fastapi, target `onnx`; packages: requirements.txt here.
"""

from servelab.serving.inference_api import create_app

app = create_app("onnx")
