"""FastAPI inference service, ONNX Runtime. Run: uvicorn fastapi_onnx.app:app --port 8000"""
from servelab.inference_api import create_app

app = create_app("onnx")
