"""Deciding: how a decision on a question is checked and recorded (docs/architecture.md "Decide").

``gate`` (``DecisionGate``) is the one path to a decision, whoever decides; ``questions`` finds the
question a request names; ``rules`` evaluates the per-tool rules; ``decisions`` (``Decisions``)
runs single and bulk decisions under their idempotency keys and hands a run whose last question
was decided to ``runtime.continuing``.
"""
