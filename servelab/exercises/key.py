"""How an answer is compared with what its step needs: in plain, or sealed.

Introduced in notebook 3 (every check of servelab/exercises/ compares through it).

A check reads your answer into its canonical form, a few words that say the same whatever the
spelling (`--concurrency-range=5:5` and `--concurrency-range 5` are both "5:5:1"), and asks the
step's needs about it. The needs come in two shapes that answer the same questions:

    Plain   the answer key as written (answer_key.py in the solved edition and the tests); a need
            may name the notebook's values, "{HOST}", which your answer meets by being that value
    Sealed  the same key as salted digests (answer_key.py of the class edition, made by
            `make class-edition`): the edition checks your answer without holding it in plain text

So a check says the same in either edition: which fields the step sets (found among those you
could write), whether your value of one is the step's, and whether a field you set is one the
step asks about. It never says what the step's value is: the section you are in does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from itertools import combinations

SEP = "\x1f"  # between the words of a canonical form
NAME = re.compile(r"\{([A-Z_][A-Z0-9_]*)\}")


def number(text) -> str:
    """A number's one spelling (185.0 is 185); any other text as it is."""
    try:
        value = float(str(text))
    except ValueError:
        return str(text)
    return str(int(value)) if value.is_integer() else repr(value)


def word(value) -> str | None:
    """A notebook value (HOST, RATE, TRITON) as one word of a canonical form; None for a value
    that is no single word (a list, such as RATES)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return number(value)
    if isinstance(value, str):
        return number(value.strip().rstrip("/"))
    return None


def joined(words: Iterable) -> str:
    return SEP.join(str(w) for w in words)


def candidates(words: tuple, values: dict) -> set[str]:
    """Your canonical form, and the same with each notebook value it holds written as the value's
    name ("127.0.0.1:8000" as "{HOST}"): a need written with the name is met by the value."""
    words = tuple(str(w) for w in words)
    named = [(n, w) for n, v in values.items() if (w := word(v)) is not None and w in words]
    found = set()
    for k in range(len(named) + 1):
        for chosen in combinations(named, k):
            these = list(words)
            for name, w in chosen:
                these = [f"{{{name}}}" if x == w else x for x in these]
            found.add(joined(these))
    return found


def names_in(template) -> set[str]:
    """The notebook values a need is written with ({HOST} -> HOST), however deep."""
    if isinstance(template, str):
        return set(NAME.findall(template))
    if isinstance(template, (list, tuple)):
        return set().union(*(names_in(t) for t in template)) if template else set()
    return set(getattr(template, "names", lambda: set())())


def prefixes(path: str) -> list[str]:
    """ "a.b.c" -> ["a", "a.b", "a.b.c"]."""
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def digest(salt: str, step: str, tag: str, field: str, form: str = "") -> str:
    text = joined((salt, step, tag, field, form))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# a canonical form's reader: (field, value, n_gpus) -> its words (the checks give theirs)
Canon = Callable[[str, object, int], tuple]


class Needs:
    """What one step needs, as its checks ask it. `step`: the step whose key this is; `values`:
    the notebook's values (exercises.given) the check compares with."""

    step: str
    values: dict
    count: int  # how many fields the step sets
    uses: frozenset  # the notebook values its needs are written with

    def fields(self, among: Iterable[str]) -> list[str]:
        """The fields the step sets, among `among`, in that order."""
        raise NotImplementedError

    def meets(self, field: str, words: tuple, canon: Canon) -> bool:
        """Is your canonical form of `field` the step's (with the notebook's values named)?"""
        raise NotImplementedError

    def covers(self, path: str) -> bool:
        """Does the step ask about this field, or a field inside it, or one it is inside?"""
        raise NotImplementedError

    @property
    def n_gpus(self) -> int:
        return int(self.values.get("N_GPUS") or 0)


class Plain(Needs):
    """The needs as the answer key writes them: {field: value}."""

    def __init__(self, step: str, needs: dict, values: dict | None = None):
        self.step, self.needs, self.values = step, dict(needs), dict(values or {})
        self.count = len(self.needs)
        self.uses = frozenset().union(*(names_in(v) for v in self.needs.values()))

    def fields(self, among):
        return [f for f in among if f in self.needs]

    def meets(self, field, words, canon):
        want = joined(canon(field, self.needs[field], self.n_gpus))
        return want in candidates(words, self.values)

    def covers(self, path):
        return any(
            path == a or a.startswith(f"{path}.") or path.startswith(f"{a}.") for a in self.needs
        )

    @property
    def n_gpus(self) -> int:
        fixed = [getattr(v, "n_gpus", None) for v in self.needs.values()]
        fixed = [n for n in fixed if isinstance(n, int)]
        return fixed[0] if fixed else super().n_gpus


class Sealed(Needs):
    """The needs as salted digests: {"count": n, "uses": [...], "digests": [...]}."""

    def __init__(self, step: str, sealed: dict, salt: str, values: dict | None = None):
        self.step, self.salt, self.values = step, salt, dict(values or {})
        self.count, self.uses = sealed["count"], frozenset(sealed["uses"])
        self.digests = frozenset(sealed["digests"])

    def _has(self, tag: str, field: str, form: str = "") -> bool:
        return digest(self.salt, self.step, tag, field, form) in self.digests

    def fields(self, among):
        return [f for f in among if self._has("asks", f)]

    def meets(self, field, words, canon):
        return any(self._has("value", field, c) for c in candidates(words, self.values))

    def covers(self, path):
        return self._has("under", path) or any(self._has("asks", p) for p in prefixes(path))


# the GPU counts a sealed need that depends on them is sealed for (a node has at most 8)
GPU_COUNTS = range(9)


def seal(step: str, needs: dict, canon: Canon, salt: str) -> dict:
    """A step's plain needs as Sealed reads them: each field, each prefix of it, and its value in
    canonical form (for every GPU count where the value depends on it), as digests."""
    found = set()
    for field, template in needs.items():
        found.add(digest(salt, step, "asks", field))
        found |= {digest(salt, step, "under", p) for p in prefixes(field)}
        counts = GPU_COUNTS if getattr(template, "per_gpu_count", False) else (0,)
        for n in counts:
            found.add(digest(salt, step, "value", field, joined(canon(field, template, n))))
    return {"count": len(needs), "uses": sorted(Plain(step, needs).uses), "digests": sorted(found)}
