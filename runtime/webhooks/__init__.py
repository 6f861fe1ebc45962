"""Webhooks: events sent, signed, to the receivers that asked for them (docs/webhooks.md).

``dispatcher`` derives deliveries from the event log and sends them (``WebhookDispatcher``);
``messages`` builds and signs the Standard Webhooks messages; ``http`` posts them.
"""
