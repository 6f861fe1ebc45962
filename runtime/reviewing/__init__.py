"""The reviewers' queue (issue 45; docs/api.md "The reviewers' queue"): the pending questions a
principal may decide across every agent (``queue``), kept current per subscriber (``live``), the
review claims that say who is looking at one (``claims``), and the typed refusals of separation
of duties and review claims (``errors``). The gate (``runtime.deciding.gate``) applies the rules;
nothing is imported here, so the gate may import ``errors`` without importing the queue, which
imports the gate.
"""
