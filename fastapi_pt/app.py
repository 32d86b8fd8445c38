"""FastAPI inference service, PyTorch runtime. Run: uvicorn fastapi_pt.app:app --port 8000"""
from servelab.inference_api import create_app

app = create_app("pytorch")
