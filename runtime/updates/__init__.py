"""Run updates: the progress of a run as it continues, for ``runUpdates`` (docs/architecture.md "Run updates").

``run_updates`` holds the updates' shapes; ``publishing`` turns a continuation's event stream
into updates and writes them in batches, handing them at once to this process's ``listener``s;
``feed`` serves them to subscribers on any instance.
"""
