"""Alert delivery: the ``AlertSink`` port of ``armd.control.ports`` for the hooks of ``[[alerts]]``.

An alert must reach a person even when nobody watches the log, and a broken
receiver must never slow the control loop down. So ``AlertDispatcher``
deduplicates and queues events and one background thread hands them to the
hooks (``WebhookHook``, ``CommandHook``, ``LogHook``), each with its own
timeout and retries.
"""

from armd.adapters.alerts.dispatch import AlertDispatcher, event_json
from armd.adapters.alerts.hooks import CommandHook, DeliveryError, Hook, LogHook, WebhookHook, build_hooks, signature

__all__ = [
    "AlertDispatcher",
    "CommandHook",
    "DeliveryError",
    "Hook",
    "LogHook",
    "WebhookHook",
    "build_hooks",
    "event_json",
    "signature",
]
