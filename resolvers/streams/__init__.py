"""The subscription fields: ``suspendedRunEvents`` (``subscriptions``), ``runUpdates``
(``run_updates``), ``reviewQueueEvents`` (``review_queue_events``), and which run events a
subscriber may receive (``visibility``)."""
