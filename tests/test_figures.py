"""Every figure a text quotes from a reference page is the page's (maintainers/figures/): the texts
are what `make figures` writes, the markers are read and refused as they should be, and a new
page rewrites a figure without a test changing its name."""

import json

import pytest

from maintainers import figures
from maintainers.figures import __main__ as command
from maintainers.figures import core, pages


def test_every_quoted_figure_is_its_pages():
    assert command.main(["--check"]) == 0, "a text quotes a stale figure: run `make figures`"


def test_every_text_that_cites_a_page_quotes_figures():
    quoting = {p.name for p in figures.texts() if "<!--fig " in p.read_text()}
    assert {"README.md", "answer_key.md", "instructors.md", "notes.md"} <= quoting
    assert {"06_triton_benchmarks.py", "07_how_close_to_the_hardware.py"} <= quoting


@pytest.fixture
def registered(monkeypatch):
    """A scratch registry, so the test's figures do not join the real ones."""
    monkeypatch.setattr(core, "FIGURES", {})
    return core.FIGURES


def test_a_figure_is_computed_afresh_in_prose_and_in_code(registered):
    core.figure("speed")(lambda: "1.46")
    text = (
        "# ran <!--fig speed-->1.55<!--/fig-->x faster\n"
        'print(\n    "was "\n    "1.55"  # fig speed\n)\n'
    )
    new, used = core.render(text)
    assert used == {"speed"}
    assert new == (
        "# ran <!--fig speed-->1.46<!--/fig-->x faster\n"
        'print(\n    "was "\n    "1.46"  # fig speed\n)\n'
    )
    assert core.render(new)[0] == new  # written once, current after


def test_an_unknown_figure_or_an_unclosed_marker_is_refused(registered):
    with pytest.raises(KeyError, match="no figure named 'missing'"):
        core.render("<!--fig missing-->1<!--/fig-->", "README.md")
    core.figure("speed")(lambda: "1")
    with pytest.raises(ValueError, match="no <!--/fig--> on the same line"):
        core.render("<!--fig speed-->1\n<!--/fig-->", "README.md")
    with pytest.raises(ValueError, match="two figures named"):
        core.figure("speed")(lambda: "2")


def test_a_new_run_on_a_page_changes_the_figure_not_a_test(tmp_path, monkeypatch):
    """The date and the ratio a text quotes follow the page's files: a new run is a new text."""
    page = tmp_path / "cpu" / "bench_fastapi"
    page.mkdir(parents=True)
    record = {
        "date": "2027-01-05 10:00:00",
        "pytorch_p50_ms": 60.0,
        "onnx_p50_ms": 20.0,
        "ratio_pytorch_over_onnx_p50": 3.0,
    }
    (page / "bench_fastapi.json").write_text(json.dumps(record))
    monkeypatch.setattr(
        figures.bench, "page", lambda setup, name: pages.Page(setup, name, tmp_path)
    )
    text = "on <!--fig cpu_bench_date-->2026-11-22<!--/fig--> "
    text += "<!--fig cpu_bench_runtime_ratio-->x<!--/fig-->"
    assert core.render(text)[0] == (
        "on <!--fig cpu_bench_date-->2027-01-05<!--/fig--> "
        "<!--fig cpu_bench_runtime_ratio-->60.0 / 20.0 ms = 3.00<!--/fig-->"
    )


def test_a_missing_file_says_which():
    missing = pages.Page("h100", "no_such_page")
    with pytest.raises(FileNotFoundError, match="no_such_page/runs.json"):
        missing.day("triton")
