"""`make timing`: fill the lease plan's pages; --check: exit 1 where one is stale."""

from __future__ import annotations

import argparse
import sys

from maintainers.timing import pages
from maintainers.timing.plan import GOALS, plan, totals
from servelab.paths import REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m maintainers.timing", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = pages.stale()
        for path in stale:
            print(f"{path.relative_to(REPO_ROOT)} is stale: run `make timing`", file=sys.stderr)
        return 1 if stale else 0
    for path in pages.write():
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    fresh, image = totals(plan()), totals(plan(prepared_image=True))
    print(
        "notebooks 2-6, median student: "
        + ", ".join(f"{p} {m:.0f} min (goal {GOALS[p]})" for p, m in fresh.items())
        + f"; measure on the class's prepared image {image['measure']:.0f} min"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
