"""The subscription fields: ``suspendedRunEvents`` (``subscriptions``), ``runUpdates``
(``run_updates``), and which run events a subscriber may receive (``visibility``)."""
