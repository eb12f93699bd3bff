"""Host checks for ``agentmeter doctor`` and ``agentmeter hosts check``: for each host a suite's
sandbox uses, is it reachable, is its key accepted, does its docker engine answer, what is
its swarm state, are the suite's CLIs there, and how much disk is free.

Every check is a :class:`HostCheck` (``ok`` None = not applicable or only informative).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from typing import TYPE_CHECKING, Any

from .checks import HostCheck

if TYPE_CHECKING:
    from ..suites.suite import Suite

MIN_FREE_GB = 2.0




def _disk(subject: str, free_bytes: int | None, where: str) -> HostCheck:
    if free_bytes is None:
        return HostCheck(subject, None, f"free disk at {where} unknown")
    gb = free_bytes / 1e9
    return HostCheck(subject, gb >= MIN_FREE_GB, f"{gb:.1f} GB free at {where}",
                     "" if gb >= MIN_FREE_GB else f"free some disk: trials need at least {MIN_FREE_GB:g} GB")


def _executables(suite: Suite, clis_root: str) -> dict[str, str]:
    """adapter name -> the executable it runs, in the host's terms (bundled ones need none)."""
    from ..harnesses import get_adapter

    found = {}
    for cli in suite.spec.clis:
        adapter = get_adapter(cli.adapter)
        if adapter.install.registry != "bundled":
            found[cli.adapter] = adapter.executable(clis_root)
    return found


# -- ssh hosts -----------------------------------------------------------------------------------

async def check_ssh_host(host: Any, suite: Suite, known_hosts: str | None = None,
                         timeout: float = 10.0) -> list[HostCheck]:
    from .ssh.conn import HostKeyError, connect
    from .ssh.hosts import q

    name = f"ssh {host.display}"
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host.address, host.port), timeout)
        writer.close()
    except (OSError, TimeoutError) as exc:
        return [HostCheck(f"{name}: reachable", False, f"{host.address}:{host.port}: {exc or 'timed out'}",
                          "check the address and port, and that sshd runs there")]
    checks = [HostCheck(f"{name}: reachable", True, f"{host.address}:{host.port} answers")]
    try:
        conn = await connect(host.target(known_hosts), timeout=timeout)
    except HostKeyError as exc:
        return checks + [HostCheck(f"{name}: host key", False, str(exc),
                                   f"agentmeter hosts accept {host.user}@{host.address}:{host.port}")]
    except Exception as exc:  # noqa: BLE001 - an auth or protocol failure is the finding
        return checks + [HostCheck(f"{name}: host key", True, "accepted"),
                         HostCheck(f"{name}: login", False, str(exc), "check the user and key in the hosts list")]
    checks.append(HostCheck(f"{name}: host key", True, "accepted"))
    async with conn:
        async def sh(command: str) -> tuple[int, str]:
            result = await conn.run(command, check=False)
            return result.exit_status or 0, (result.stdout or "").strip() + (result.stderr or "").strip()

        code, out = await sh("docker version --format '{{.Server.Version}}' 2>&1")
        checks.append(HostCheck(f"{name}: docker engine", None if code else True,
                                f"engine {out}" if not code else "no docker engine answering (not needed by ssh)"))
        if not code:
            _, state = await sh("docker info --format '{{.Swarm.LocalNodeState}}'")
            checks.append(HostCheck(f"{name}: swarm", None, f"swarm state: {state or 'unknown'}"))
        missing = []
        for adapter, path in _executables(suite, host.clis).items():
            if (await sh(f"test -x {q(path)}"))[0]:
                missing.append(f"{adapter} ({path})")
        wants_python = any(c.adapter == "reference" for c in suite.spec.clis)
        if wants_python and (await sh(f"command -v {q(host.python)}"))[0]:
            missing.append(f"reference agent's {host.python}")
        checks.append(HostCheck(f"{name}: CLIs", not missing, "missing: " + ", ".join(missing) if missing
                                else f"the suite's CLIs are under {host.clis}",
                                "install them there (agentmeter install-clis on the host)" if missing else ""))
        from .ssh.hosts import private_root

        code, out = await sh(f"{private_root(host.work_root)} && df -Pk {q(host.work_root)} | tail -1")
        if code == 97:
            return checks + [HostCheck(f"{name}: work root", False, out.removeprefix("agentmeter-foreign "),
                                       "remove it, or set work_root elsewhere")]
        fields = out.split()
        free = int(fields[3]) * 1024 if code == 0 and len(fields) >= 4 and fields[3].isdigit() else None
        checks.append(_disk(f"{name}: disk", free, host.work_root))
    return checks


# -- docker engines ------------------------------------------------------------------------------

def check_docker_engine(url: str | None, suite: Suite | None = None, *, key: str | None = None,
                        known_hosts: str | None = None, clis: str = "mount") -> list[HostCheck]:
    """Blocking: engine answering, its swarm state, free disk (local engines), CLIs to mount."""
    from ..paths import default_clis_root
    from .docker import engine as engines

    name = f"docker {url or 'local'}"
    try:
        client = engines.connect(url, key=key, known_hosts=known_hosts, timeout=30)
    except engines.EngineError as exc:
        fix = "agentmeter hosts accept ..." if "known_hosts" in str(exc) else "start dockerd (or fix the URL)"
        return [HostCheck(f"{name}: engine", False, str(exc), fix)]
    try:
        info = client.info()
        checks = [HostCheck(f"{name}: engine", True, f"Docker {info.get('ServerVersion')} answering")]
        swarm = info.get("Swarm") or {}
        manager = " (manager)" if swarm.get("ControlAvailable") else ""
        checks.append(HostCheck(f"{name}: swarm", None, f"swarm state: {swarm.get('LocalNodeState', '?')}{manager}"))
        root = info.get("DockerRootDir") or "/var/lib/docker"
        local = engines.is_local_url(url)
        free = shutil.disk_usage(root).free if local and os.path.isdir(root) else None
        checks.append(_disk(f"{name}: disk", free, root))
        if suite is not None and clis == "mount" and local:
            missing = [f"{a} ({p})" for a, p in _executables(suite, str(default_clis_root())).items()
                       if not os.path.exists(p)]
            checks.append(HostCheck(f"{name}: CLIs", not missing, "missing: " + ", ".join(missing) if missing
                                    else "the suite's CLIs are on this machine, mounted read-only",
                                    "agentmeter install-clis" if missing else ""))
        return checks
    finally:
        client.close()


# -- a suite's hosts -----------------------------------------------------------------------------

async def check_suite_hosts(suite: Suite) -> list[HostCheck]:
    """Every check for every host of the suite's sandbox (none for the local sandbox)."""
    from . import SANDBOXES

    from ..extras import MissingExtra

    kind = suite.spec.sandbox.kind
    try:
        return await SANDBOXES.get(kind)(suite, suite.spec.sandbox.model_dump(exclude={"kind"})).check_hosts()
    except MissingExtra as exc:  # the kind's package is an extra this install lacks: a failed check, with the fix
        return [HostCheck(f"{kind} sandbox", False, str(exc).split(": pip install")[0], exc.fix)]
