"""Sandboxes give each trial a fresh workspace and HOME, run the agent, and kill it cleanly.

Looked up by the suite's ``sandbox`` name; the docker and ssh kinds import their SDKs only
when a suite asks for them.
"""

from __future__ import annotations

from ..registry import LazyRegistry
from .base import AgentHandle, ExecResult, LaunchSpec, Sandbox, SandboxSession

SANDBOXES: LazyRegistry[Sandbox] = LazyRegistry("sandbox", {
    "local": "agentmeter_tui.core.sandboxes.local:LocalSandbox",
    "docker": "agentmeter_tui.core.sandboxes.docker.sandbox:DockerSandbox",
    "ssh": "agentmeter_tui.core.sandboxes.ssh.sandbox:SshSandbox",
    "swarm": "agentmeter_tui.core.sandboxes.docker.swarm:SwarmSandbox",
})

__all__ = ["SANDBOXES", "AgentHandle", "ExecResult", "LaunchSpec", "Sandbox", "SandboxSession"]
