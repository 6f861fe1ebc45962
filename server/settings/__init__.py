"""runsgate's settings, read from the environment (``RUNSGATE_*``, docs/configuration.md): the
whole (``core``: ``Settings``, ``load_settings``, ``ConfigError``) and its mixins, authentication
and request limits (``security``), webhook receivers (``webhooks``) and what one principal may
hold open (``streams``)."""

from .core import DEMO_AGENTS, SECRET_SETTINGS, ConfigError, Settings, describe_error, load_settings
from .security import ApiKeyConfig, SecuritySettings, ToolRuleConfig, is_loopback, security_problems
from .streams import StreamSettings
from .webhooks import WebhookConfig, WebhookSettings

__all__ = [
    "DEMO_AGENTS",
    "SECRET_SETTINGS",
    "ApiKeyConfig",
    "ConfigError",
    "SecuritySettings",
    "Settings",
    "StreamSettings",
    "ToolRuleConfig",
    "WebhookConfig",
    "WebhookSettings",
    "describe_error",
    "is_loopback",
    "load_settings",
    "security_problems",
]
