"""Events: the audit trail of every run (docs/architecture.md "Events").

``journal`` builds and writes events; ``feed`` follows the log for ``suspendedRunEvents``;
``retention`` deletes the events of runs finished long ago.
"""
