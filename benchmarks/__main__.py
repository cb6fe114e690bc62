"""Run the benchmarks: every `benchmarks/bench_*.py` module's `main()`, in name order.

    python -m benchmarks              # all of them
    python -m benchmarks trace        # only bench_trace.py (the `bench_` prefix is optional)
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    """The benchmark module names, `bench_*`, sorted."""
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = available()
    if argv:
        wanted = [a if a.startswith("bench_") else f"bench_{a}" for a in (s.removesuffix(".py") for s in argv)]
        unknown = [w for w in wanted if w not in names]
        if unknown:
            print(f"error: no benchmark {', '.join(unknown)}; choose from: {', '.join(names)}", file=sys.stderr)
            return 2
        names = wanted
    for i, name in enumerate(names):
        if i:
            print()
        print(f"== {name} ==", flush=True)
        importlib.import_module(f"{__package__}.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
