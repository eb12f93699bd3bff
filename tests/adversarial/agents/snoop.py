"""An agent that hunts for the runner's powers: ``snoop.py KEY STORE SOCKET ESCAPE TASK``.

It waits for SIGUSR1 (the test sends it once every trial of the run is up, so whatever it
could see of another trial is there), then prints one JSON line of what it found:

- ``keys``: the pids whose /proc/<pid>/environ it could read and that hold KEY (a fake
  provider key planted in the runner's environment), ``environs`` how many it could read;
- ``others``: the processes it sees that are not its own (their command lines): the runner,
  another trial's agent;
- ``sockets``: the unix sockets it reached (the control socket by the path it was given and
  every path of /proc/net/unix), with what a status request got back;
- ``store``: what it read of the store, by the path given and every path it found in the
  command lines and environments it could read;
- ``escaped``: the files it managed to write outside its folders (ESCAPE, in the task folder).
"""

import contextlib
import json
import os
import signal
import socket
import sys

# A leading "@" keeps a path from being a file the command names, which the local sandbox
# binds into the agent's view (read-only; readable when the agent has the runner's uid).
KEY, STORE, SOCKET, ESCAPE, TASK = (arg.removeprefix("@") for arg in sys.argv[1:6])


def read(path, limit=1 << 16):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def processes():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def hunt():
    found = {"keys": [], "environs": 0, "others": [], "sockets": {}, "store": [], "escaped": []}
    paths = {STORE}
    for pid in processes():
        environ = read(f"/proc/{pid}/environ")
        cmdline = (read(f"/proc/{pid}/cmdline") or b"").replace(b"\0", b" ").decode(errors="replace")
        if environ is not None:
            found["environs"] += 1
            if KEY.encode() in environ:
                found["keys"].append(pid)
        if pid != os.getpid() and not (pid == 1 and "bwrap" in cmdline):
            found["others"].append(cmdline[:120])
        for word in (cmdline + " " + (environ or b"").replace(b"\0", b" ").decode(errors="replace")).split():
            if word.endswith(".db") and word.startswith("/"):
                paths.add(word.partition("=")[2] or word)
    unix = (read("/proc/net/unix", 1 << 22) or b"").decode(errors="replace").splitlines()[1:]
    for path in {SOCKET, *(line.split()[7] for line in unix if len(line.split()) > 7)}:
        if path.startswith("@"):
            continue
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(5)
            conn.connect(path)
            conn.sendall(b'{"op": "status"}\n')
            found["sockets"][path] = conn.recv(4096).decode(errors="replace")[:200]
    for path in sorted(paths):
        data = read(path, 16)
        if data is not None:
            found["store"].append(path)
    for target in (ESCAPE, os.path.join(TASK, "escaped.txt")):
        with contextlib.suppress(OSError), open(target, "w") as handle:
            handle.write("escaped")
            found["escaped"].append(target)
    found["others"] = found["others"][:20]  # one line of the transcript says enough
    return found


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, lambda *_: None)
    signal.pause()
    print(json.dumps(hunt()), flush=True)
