"""`make figures` / `python -m maintainers.figures [--check]` (see
maintainers/figures/__init__.py)."""

from __future__ import annotations

import argparse
import sys

from maintainers.figures import stale, unused
from servelab.paths import REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the texts' quoted figures, from their pages")
    parser.add_argument("--check", action="store_true", help="exit 1 if a text is stale")
    args = parser.parse_args(argv)
    fresh, dead = stale(), unused()
    if dead:
        print(f"figures no text quotes (remove them): {', '.join(dead)}", file=sys.stderr)
    if args.check:
        for path in fresh:
            print(f"{path.relative_to(REPO_ROOT)}: stale figures (make figures)", file=sys.stderr)
        return 1 if fresh or dead else 0
    for path, text in fresh.items():
        path.write_text(text)
        print(f"rewrote {path.relative_to(REPO_ROOT)}")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
