"""Throwaway sshd instances on 127.0.0.1 for the ssh sandbox tests (and the overhead benchmark).

Each instance has its own generated host key and client key, listens on a free port of
127.0.0.1 only, accepts only that key, and runs in the foreground as a child of the test, so
``crash()`` (SIGKILL to the daemon and every connection process) is a host that vanished.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import psutil

from tests.waiting import wait_for

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SFTP_SERVER = next((p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                                "/usr/lib/ssh/sftp-server") if os.path.exists(p)), "internal-sftp")


def sshd_available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None and os.geteuid() == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agentmeter-test", "-f", str(path)],
                   check=True)
    return path


class SshdInstance:
    def __init__(self, folder: Path, port: int | None = None, client_key: Path | None = None):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.host_key = keygen(folder / "host_ed25519")
        self.client_key = client_key or keygen(folder / "client_ed25519")
        self.known_hosts = folder / "known_hosts"
        self.work_root = folder / "work"
        self.process: subprocess.Popen | None = None

    @property
    def host_key_line(self) -> str:
        algorithm, key = (self.host_key.with_suffix(".pub")).read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {algorithm} {key}"

    def trust(self, known_hosts: Path | None = None) -> Path:
        """Record this host's key in ``known_hosts`` (what `agentmeter hosts accept` does)."""
        path = known_hosts or self.known_hosts
        with path.open("a") as handle:
            handle.write(self.host_key_line + "\n")
        return path

    def start(self) -> SshdInstance:
        (self.folder / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        config = self.folder / "sshd_config"
        config.write_text(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.host_key}
PidFile {self.folder}/sshd.pid
AuthorizedKeysFile {self.folder}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
MaxSessions 64
MaxStartups 100:30:200
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
Subsystem sftp {SFTP_SERVER}
LogLevel ERROR
""")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.work_root.mkdir(exist_ok=True)
        log = (self.folder / "sshd.log").open("ab")
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log,
                                        stdin=subprocess.DEVNULL)
        wait_for(self._listening, f"sshd on 127.0.0.1:{self.port} to listen")
        return self

    def _listening(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"sshd exited: {(self.folder / 'sshd.log').read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def crash(self) -> None:
        """SIGKILL the daemon and every per-connection sshd: open connections drop at once."""
        if self.process is None:
            return
        try:
            tree = [psutil.Process(self.process.pid), *psutil.Process(self.process.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        daemons = [p for p in tree if _is_sshd(p)]
        for proc in daemons:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        self.process.wait(timeout=120)
        self.process = None

    def stop(self) -> None:
        self.crash()

    def host_toml(self, name: str, slots: int = 2, known_hosts: Path | None = None) -> str:
        return (f'[[sandbox.hosts]]\nname = "{name}"\naddress = "127.0.0.1"\nport = {self.port}\nuser = "root"\n'
                f'key = "{self.client_key}"\nslots = {slots}\nwork_root = "{self.work_root}"\n'
                f'known_hosts = "{known_hosts or self.known_hosts}"\n')

    def sandbox_toml(self, slots: int = 2, name: str = "loopback") -> str:
        if not self.known_hosts.exists() or self.host_key_line not in self.known_hosts.read_text():
            self.trust()
        return 'kind = "ssh"\nprobe_interval = 0.5\n\n' + self.host_toml(name, slots)


def _is_sshd(proc: psutil.Process) -> bool:
    try:
        return "sshd" in proc.name()
    except psutil.NoSuchProcess:
        return False
