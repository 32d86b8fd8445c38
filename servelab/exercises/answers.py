"""An exercise's answer as every check reads it: still blank (`...`) or written, a text where a
text is asked, and NotYet, the one sentence that stops the notebook at an exercise.

Introduced in notebook 3 (servelab/exercises/'s checks answer with it).
"""

from __future__ import annotations

import re


class NotYet(Exception):
    """An exercise that is not written, or not right yet: one sentence, no traceback.

    IPython shows what _render_traceback_() returns in place of a traceback; the exception still
    stops "Run All" at this cell, as any error does.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def blank(answer) -> bool:
    """Still the `...` the student edition holds (or an empty text)?"""
    return answer is Ellipsis or (isinstance(answer, str) and answer.strip() in ("", "..."))


def not_written(step: str, noun: str, what: str, where: str) -> NotYet:
    """The sentence for an answer still blank: what to write in its place, and where to look."""
    return NotYet(f"{step}: replace the `...` in the cell above with {noun} ({what}); {where}.")


def written_text(answer, step: str, noun: str, what: str, where: str) -> str:
    """The answer, when it is a written text; NotYet otherwise."""
    if blank(answer):
        raise not_written(step, noun, what, where)
    if not isinstance(answer, str):
        raise NotYet(
            f"{step}: your answer is a {type(answer).__name__}, not a text: put it in quotes "
            "(an f-string can use the notebook's variables, such as {HOST})."
        )
    return answer


def section(step: str) -> str:
    """Where a step's text is, for a check that points there: "6.1b" -> "section 6.1"."""
    found = re.match(r"\d+\.\d+", step)
    return f"section {found[0]}" if found else "the text above it"
