"""labenv.triton_urls: the three Triton addresses a notebook needs, from the environment or Triton's default ports."""
from servelab import labenv


def test_triton_urls_default_to_triton_ports_on_the_http_host(monkeypatch):
    monkeypatch.setenv("TRITON_SERVER_URL", "http://triton_server:8000/")
    monkeypatch.delenv("TRITON_GRPC_URL", raising=False)
    monkeypatch.delenv("TRITON_METRICS_URL", raising=False)
    assert labenv.triton_urls() == ("http://triton_server:8000", "triton_server:8001",
                                    "http://triton_server:8002/metrics")


def test_triton_urls_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRITON_SERVER_URL", "http://127.0.0.1:41000")
    monkeypatch.setenv("TRITON_GRPC_URL", "127.0.0.1:41001")
    monkeypatch.setenv("TRITON_METRICS_URL", "http://127.0.0.1:41002/metrics")
    assert labenv.triton_urls() == ("http://127.0.0.1:41000", "127.0.0.1:41001", "http://127.0.0.1:41002/metrics")
