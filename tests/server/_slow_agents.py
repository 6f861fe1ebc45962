"""The demo agents, behind an import that takes 60 s: as the whole app's imports on a loaded machine
(``RUNSGATE_AGENTS=tests.server._slow_agents:AGENTS``)."""

import time

from runtime.demo import AGENTS

time.sleep(60)

__all__ = ["AGENTS"]
