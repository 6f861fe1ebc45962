"""Run updates: the progress of a run as it continues, for ``runUpdates`` (docs/architecture.md "Run updates").

``run_updates`` holds the updates' shapes; ``publishing`` turns a continuation's event stream
into updates and writes them in batches; ``feed`` serves them to subscribers on any instance.
"""
