"""Benchmarks of runsgate's listing through the full HTTP stack (issue 6 §4).

``./dev bench`` (``python -m bench`` in the project's environment) runs them and writes ``bench/RESULTS.md``.
Not part of ``./dev test``; ``tests/bench`` runs the same machinery at a tiny size.
"""
