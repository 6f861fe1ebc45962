"""HTTP/WebSocket serving: the Starlette app, config and CLI."""

from .app import create_app
from .config import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "create_app", "load_settings"]
