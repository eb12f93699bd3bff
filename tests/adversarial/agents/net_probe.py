"""An agent that looks for a way out of its one path to its model: it connects to every TCP
listener it can find in ``/proc/net/tcp`` and ``tcp6`` (on the host's network: the runner's
scripted server, other runners' servers, sshd), to the addresses it is given on its command
line (``HOST:PORT``: a listener of the test's on 127.0.0.1, ::1 and a non-loopback address of
the host), then makes one model call on its base URL. It prints one JSON line: what answered
(its model's port left out) and the model call's status."""

import json
import os
import socket
import sys
import urllib.error
import urllib.request
from urllib.parse import urlsplit


def listeners() -> set[tuple[str, int]]:
    """Every listening TCP socket in this network namespace's tables (a copy of key_thief's
    reading would need its file in the trial's view: this one stands alone)."""
    rows = []
    for table, host in (("/proc/net/tcp", "127.0.0.1"), ("/proc/net/tcp6", "::1")):
        if os.path.exists(table):
            with open(table) as handle:
                rows += [(host, line.split()) for line in handle.read().splitlines()[1:]]
    return {(host, int(fields[1].rsplit(":", 1)[1], 16)) for host, fields in rows if fields[3] == "0A"}


def reaches(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect((host, port))
            return True
        except OSError:
            return False


def model_call(base: str, key: str) -> int:
    body = json.dumps({"model": "mock", "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(base.rstrip("/") + "/chat/completions", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return -1


def main(targets: list[str]) -> None:
    base = os.environ["REFAGENT_BASE_URL"]
    model_port = urlsplit(base).port
    tried = {(host, int(port)) for host, _, port in (t.rpartition(":") for t in targets)}
    tried |= {(host, port) for host, port in listeners() if port != model_port}
    reached = sorted(f"{host}:{port}" for host, port in tried if reaches(host, port))
    status = model_call(base, os.environ["REFAGENT_API_KEY"])
    print(json.dumps({"tried": len(tried), "reached": reached, "model": status,
                      "namespace": os.readlink("/proc/self/ns/net")}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
