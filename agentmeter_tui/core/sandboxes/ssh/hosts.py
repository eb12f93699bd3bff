"""SSH hosts: the suite's ``[[sandbox.hosts]]`` or a hosts file, and the remote shell snippets
the ssh sandbox runs there.

A hosts file is TOML with ``[[hosts]]`` tables (the same keys as in the suite); its relative
key paths are relative to the hosts file. Errors name the file, line and field.
"""

from __future__ import annotations

import getpass
import shlex
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ... import procs
from ...tomlerrors import load_toml, validate
from ..common import Settings, resolve_path
from .conn import SshTarget


class SshHost(Settings):
    name: str | None = None
    address: str
    port: int = Field(22, ge=1, le=65535)
    user: str = Field(default_factory=getpass.getuser)
    key: str | None = None
    known_hosts: str | None = None  # default: the sandbox's, else ~/.ssh/known_hosts
    slots: int = Field(2, ge=1, le=256)
    work_root: str = "/tmp/agentmeter-remote"
    labels: list[str] = []
    python: str = "python3"
    clis_root: str | None = None  # default: <work_root>/clis

    _paths = field_validator("key", "known_hosts")(resolve_path)

    @field_validator("work_root", "clis_root")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be an absolute path on the host")
        return value.rstrip("/") if value else value

    @property
    def display(self) -> str:
        return self.name or f"{self.address}:{self.port}"

    def target(self, known_hosts: str | None = None) -> SshTarget:
        return SshTarget(self.address, self.port, self.user, self.key, self.known_hosts or known_hosts)

    @property
    def clis(self) -> str:
        return self.clis_root or f"{self.work_root}/clis"


class HostsFile(Settings):
    hosts: list[SshHost] = Field(min_length=1)


def load_hosts_file(path: Path) -> list[SshHost]:
    data, text = load_toml(path)
    return validate(HostsFile, data, path, text, context={"base": path.parent}).hosts


class SshSettings(Settings):
    hosts: list[SshHost] = []
    hosts_file: str | None = None
    known_hosts: str | None = None
    probe_interval: float = Field(10.0, gt=0)
    connect_timeout: float = Field(10.0, gt=0)
    sessions_per_connection: int = Field(3, ge=1, le=64)  # sshd's MaxSessions is 10 per connection

    _paths = field_validator("hosts_file", "known_hosts")(resolve_path)

    @model_validator(mode="after")
    def _load_hosts(self, info: ValidationInfo) -> SshSettings:
        if self.hosts_file:
            self.hosts = [*self.hosts, *load_hosts_file(Path(self.hosts_file))]
        if not self.hosts:
            raise ValueError("the ssh sandbox needs hosts: [[sandbox.hosts]] tables or a hosts_file")
        names = [h.display for h in self.hosts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"host names must be unique: {', '.join(dupes)}")
        return self


# -- remote shell --------------------------------------------------------------------------------

def q(text: str) -> str:
    return shlex.quote(text)


FOREIGN = "agentmeter-foreign"  # the first word of what private_root prints when it refuses


def private_root(path: str) -> str:
    """Shell that makes ``path`` (the host's ``work_root``, shared ``/tmp`` by default) a
    folder of the login user's, mode 0700, and checks it on every use: a link, something not a
    folder, or a folder another user made first (who would then read every trial's workspace,
    or swap a trial's folder for a link of theirs) makes it print ``FOREIGN`` and the reason and
    exit 97. A folder of ours open to others (made by an older version) is closed to 0700."""
    d = q(path)
    return (f"mkdir -p -m 700 {d} 2>/dev/null; "
            f"if [ -L {d} ] || [ ! -d {d} ]; then echo \"{FOREIGN} {path} is a link or not a folder\"; exit 97; fi; "
            f"o=$(stat -c %u {d}); if [ \"$o\" != \"$(id -u)\" ]; then "
            f"echo \"{FOREIGN} {path} belongs to uid $o, not to us (uid $(id -u))\"; exit 97; fi; "
            f"[ \"$(stat -c %a {d})\" = 700 ] || chmod 700 {d}")


async def check_root(conn: Any, host: SshHost, path: str | None = None) -> None:
    """Blocking on the host: ``path`` (default its ``work_root``) is ours alone, or RuntimeError
    naming the host and the path (the trial, or the run's host check, is refused)."""
    result = await conn.run(private_root(path or host.work_root), check=False, timeout=60)
    said = result.stdout.decode(errors="replace") if isinstance(result.stdout, bytes) else (result.stdout or "")
    if result.exit_status:
        reason = said.strip().removeprefix(FOREIGN + " ") or f"cannot make {path or host.work_root} (exit status " \
            f"{result.exit_status})"
        raise RuntimeError(f"host {host.display}: {reason}: refusing to use it (remove it, or set work_root elsewhere)")


def group_of(token: str) -> str:
    """Shell that sets ``g`` to the trial's cgroup on the host: ``agentmeter/ssh/<token>`` under
    its cgroup v2 mount (empty where it has none). Whether the group can be made and joined is
    up to the host: root, or a delegated hierarchy; elsewhere the token alone finds strays."""
    return (r"g=$(sed -n 's/^[^ ]* [^ ]* [^ ]* [^ ]* \([^ ]*\) .* - cgroup2 .*/\1/p' /proc/self/mountinfo"
            f" | head -n 1); [ -n \"$g\" ] && g=\"$g/agentmeter/ssh/\"{q(token)}; ")


async def containment(conn: Any, host: str, token: str) -> str:
    """What holds a trial's processes on ``host``, for its transcript: whether a process can be
    put into a cgroup of ours there, tried for real over the connection's control shell."""
    probe = (group_of(f"probe-{token}") + '[ -n "$g" ] && mkdir -p "$g" 2>/dev/null && '
             'sh -c \'echo $$ > "$0/cgroup.procs"\' "$g" 2>/dev/null; r=$?; [ -n "$g" ] && rmdir "$g" 2>/dev/null; exit $r')
    if await conn.script(probe, 10) == 0:
        return f"processes: cgroup v2 group per trial on host {host}"
    return f"processes: host {host} gives no writable cgroup v2; strays are found by the trial token only"


def launch_command(argv: list[str], env: dict[str, str], cwd: str, pid_file: str) -> str:
    """Start ``argv`` with exactly ``env`` in ``cwd``; sshd already gave the channel its own
    session. The pid is recorded so the kill ladder knows when the agent itself is gone. The
    shell joins the trial's cgroup first where the host lets it (``group_of``)."""
    assignments = " ".join(q(f"{k}={v}") for k, v in env.items())
    # Twice: another trial's sweep removes empty groups, this one too between mkdir and join.
    join = group_of(env[procs.TOKEN_VAR]) + \
        'j() { mkdir -p "$g" 2>/dev/null && echo $$ > "$g/cgroup.procs" 2>/dev/null; }; [ -n "$g" ] && { j || j; }; '
    return (f"{join}cd {q(cwd)} && echo $$ > {q(pid_file)} && "
            f"exec env -i {assignments} {' '.join(q(a) for a in argv)}")


def kill_script(token: str, pid_file: str | None, int_grace: float, grace: float) -> str:
    """The whole signal ladder, run on the host in one round trip.

    The trial's processes are its cgroup's members (where the host gave it one) and every
    process carrying ``AGENTMETER_TRIAL=<token>`` in its environment: SIGINT to all of them,
    SIGTERM after ``int_grace`` if the agent still runs, SIGKILL after ``grace`` or at once
    when the agent has exited (the group whole, by ``cgroup.kill``), repeated until none is
    left; then the group is removed, with any empty one a lost connection left (rmdir takes
    only empty groups). Exit 0 when none is left.
    """
    ticks_int, ticks_all = int(int_grace / 0.05), int(grace / 0.05)
    agent = f"$(cat {q(pid_file)} 2>/dev/null)" if pid_file else ""
    return f"""
tok={q(procs.TOKEN_VAR + '=' + token)}
agent={agent}
{group_of(token)}
pids() {{ grep -lzx -- "$tok" /proc/[0-9]*/environ 2>/dev/null | sed 's,^/proc/\\([0-9]*\\)/environ$,\\1,'
  [ -n "$g" ] && cat "$g/cgroup.procs" 2>/dev/null; }}
sig() {{ p=$(pids); [ -n "$p" ] || return 1; kill -s "$1" $p 2>/dev/null; return 0; }}
fin() {{ [ -n "$g" ] && for d in "$g" "${{g%/*}}"/*/; do rmdir "$d" 2>/dev/null; done; exit 0; }}
agent_alive() {{ [ -n "$agent" ] && [ -d "/proc/$agent" ] && ! grep -q '^State:.*Z' "/proc/$agent/status" 2>/dev/null; }}
t=0
if [ {ticks_all} -gt 0 ]; then
  sig INT || fin
  while [ $t -lt {ticks_int} ] && agent_alive; do sleep 0.05; t=$((t+1)); done
  if agent_alive; then
    sig TERM
    while [ $t -lt {ticks_all} ] && agent_alive; do sleep 0.05; t=$((t+1)); done
  fi
fi
n=0
while [ -n "$g" ] && echo 1 > "$g/cgroup.kill" 2>/dev/null; sig KILL; do sleep 0.05; n=$((n+1)); [ $n -gt 200 ] && exit 1; done
fin
"""


def sweep_script(token: str) -> str:
    """SIGKILL whatever is left of a trial, at once."""
    return kill_script(token, None, 0.0, 0.0)
