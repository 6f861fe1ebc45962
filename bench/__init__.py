"""Benchmarks of runsgate's listing through the full HTTP stack (issue 6 §4).

``uv run python -m bench`` (or ``./dev bench``) runs them and writes ``bench/RESULTS.md``.
Not part of ``./dev test``; ``tests/bench`` runs the same machinery at a tiny size.
"""
