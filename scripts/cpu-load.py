"""The suite's load generator: keep N CPU-bound processes busy (default twice the core count).

    python3 scripts/cpu-load.py [--processes N] [--seconds S]

Each process spins a pure-Python loop, at normal priority, so the machine's load average rises by
about N. It runs until S seconds have passed (default: until SIGTERM or Ctrl-C), then stops every
process. docs/testing.md "A busy machine" runs the suite under it; the tests of a loaded start
(tests/server/test_busy_machine.py) start it too.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time


def spin() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cpu-load.py", description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2 * (os.cpu_count() or 1), help="default: 2 x cores")
    parser.add_argument("--seconds", type=float, default=None, help="default: until SIGTERM or Ctrl-C")
    args = parser.parse_args(argv)
    workers = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.processes)]
    for worker in workers:
        worker.start()
    print(f"cpu-load: {args.processes} busy processes ({os.cpu_count()} cores)", flush=True)
    stopped = False

    def stop(*_: object) -> None:
        nonlocal stopped
        stopped = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    while not stopped and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.2)
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
