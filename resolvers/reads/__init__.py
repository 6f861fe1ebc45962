"""The query fields (``queries``: the ``Query`` type) and what they read: pages of suspended runs
(``pagination``), a run's conversation (``conversation``), webhook deliveries (``webhooks``)."""
