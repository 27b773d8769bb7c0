"""``python -m foo_rs info | demo``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m foo_rs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, devices, memory, native vs. fallback ops")
    demo = sub.add_parser("demo", help="train an MLP on scikit-learn's digits on foo and on CPU")
    demo.add_argument("--epochs", type=int, default=8)
    demo.add_argument("--strict", action="store_true", help="fail if any op falls back to the CPU")
    args = parser.parse_args(argv)
    if args.command == "info":
        from ._info import print_info

        print_info()
    else:
        from .demo import run

        run(epochs=args.epochs, strict=args.strict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
