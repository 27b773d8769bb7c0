"""``python -m foo_rs info | demo | profile SCRIPT``."""

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
    prof = sub.add_parser(
        "profile",
        help="run a script under torch.profiler with foo's device activity; print a table, write a Chrome trace",
    )
    prof.add_argument("--trace", default="foo_trace.json", help="Chrome trace file ('' for none)")
    prof.add_argument("--rows", type=int, default=25, help="rows of the table")
    prof.add_argument("--sort-by", default="self_device_time_total", help="key_averages() table column to sort by")
    prof.add_argument("--record-shapes", action="store_true", help="group the table by input shapes")
    prof.add_argument("--with-stack", action="store_true", help="record Python stacks (slower)")
    prof.add_argument("script", help="the Python script to run")
    prof.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    args = parser.parse_args(argv)
    if args.command == "info":
        from ._info import print_info

        print_info()
    elif args.command == "profile":
        from ._profile import run as run_profile

        return run_profile(args.script, args.args, args.trace or None, args.rows, args.sort_by, args.record_shapes,
                           args.with_stack)
    else:
        from .demo import run

        run(epochs=args.epochs, strict=args.strict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
