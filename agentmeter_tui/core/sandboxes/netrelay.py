"""The model's port inside a local trial's network namespace, when the runner is not root.

A runner that is not root cannot open a socket in its agent's namespace (:mod:`.netns`), so
this script, run by the sandbox in the agent's place (our bound Python, by its path: nothing
but the standard library), opens it: ``netrelay.py PORT=SOCKET... -- ARGV...`` listens on
127.0.0.1:PORT for each pair, leaves a process of its own (not the agent's child) that pipes
each connection to the unix socket SOCKET (the runner's, in the trial's folder, relayed on to
the proxy or the scripted server), then becomes ARGV: the agent keeps its pid and pipes, and
its first model call finds the port open. The relay dies with the agent's namespace.
"""

from __future__ import annotations

import os
import socket
import sys
import threading


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _connection(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)  # by its folder's descriptor (:func:`main`): the path may pass 107 bytes
    except OSError:
        client.close()
        upstream.close()
        return
    threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
    _pipe(client, upstream)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_connection, args=(client, path), daemon=True).start()


def _relay(pairs: list[tuple[socket.socket, str]]) -> None:
    """The relay's own process: no terminal, none of the agent's pipes, not its child."""
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    threads = [threading.Thread(target=_serve, args=pair, daemon=True) for pair in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os._exit(0)


def main(args: list[str]) -> None:
    split = args.index("--")
    pairs = []
    for pair in args[:split]:
        port, _, path = pair.partition("=")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(256)
        folder = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)  # kept by the relay
        pairs.append((listener, f"/proc/self/fd/{folder}/{os.path.basename(path)}"))
    child = os.fork()
    if child == 0:
        _relay(pairs)
    os.waitpid(child, 0)
    for listener, _ in pairs:
        listener.close()
    command = args[split + 1:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
