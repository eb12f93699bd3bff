"""The scripted model server's control credential (issue 37, attack 12): the runner draws a
key when it starts the server and hands it over on the server's stdin; the ``/_scripted/``
control endpoints answer only a request that carries it in :data:`CONTROL_HEADER`. A
trial's model key never opens them. Standard library only: the runner's client imports it."""

from __future__ import annotations

import secrets

CONTROL_HEADER = "X-Agentmeter-Control"


def new_control_key() -> str:
    return secrets.token_urlsafe(32)  # 256 bits
