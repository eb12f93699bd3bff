"""The user namespace a root runner's walled trials start in, so that bwrap itself makes the
agent its uid of its own (:mod:`.uidpool`) and no program runs in between to do it.

bwrap has no way to change uid when it runs as root without a user namespace: the drop was
an exec of util-linux's ``unshare -G -S`` inside the sandbox, about 0.9 ms of each trial's
start (dynamic linking, its locale: benchmarks/containment.py). Given ``--userns FD --uid U
--gid U``, bwrap enters the namespace before its clone, becomes U there, makes the view and
drops every capability before the command. The namespace maps the pool's uids and gids to
themselves and nothing else, root included, which is what makes this work and what it buys:

- the kernel clears a process's capabilities when it leaves uid 0 *of its namespace*; here
  uid 0 is not mapped, so bwrap keeps the capabilities its setns gave it while it mounts, and
  the uid it leaves is never root where the agent lives;
- the agent is its own uid on the host too (the map is the identity), with no capability in
  this namespace (bwrap drops them all, and the namespace is the runner's, owned by root) nor
  in the host's; files of any other owner show as ``nobody``, their modes apply as ever.

One namespace serves every trial of the runner (each is still its own uid, in pid, mount,
ipc, uts and network namespaces of its own): it costs one helper process once, not one per
trial. The runner leaves its own supplementary groups first (root needs none, its
capabilities pass every mode): bwrap does not clear them, and the agent would keep them.

bwrap looks up the view's sources as the trial's uid here, so a trial whose sources lie
under a folder that uid cannot pass (a checkout in a 0700 home, a 0700 temporary folder)
gets the exec drop instead (:func:`.isolation.argv_for`).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

from .uidpool import COUNT, FIRST

# The helper: a user namespace of its own, then "ready", then wait for the runner to map it
# and take a handle (a threaded runner cannot unshare a user namespace itself).
_HELPER = ("import ctypes, os, sys\n"
           "if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:\n"
           "    sys.exit(os.strerror(ctypes.get_errno()))\n"
           "os.write(1, b'ready\\n')\n"
           "os.read(0, 1)\n")


@functools.cache
def pool_namespace() -> int | None:
    """A handle on the runner's user namespace for its trials (None: not root, or the kernel
    refuses user namespaces: trials get the exec drop). Made once per runner."""
    if os.geteuid() != 0:
        return None
    try:
        handle = _made()
    except (OSError, subprocess.SubprocessError):
        return None
    if os.getgroups():
        os.setgroups([])
    return handle


def _made() -> int:
    helper = subprocess.Popen([sys.executable, "-S", "-E", "-c", _HELPER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert helper.stdin is not None and helper.stdout is not None
    try:
        if helper.stdout.readline() != b"ready\n":
            raise OSError(f"no user namespace: {helper.communicate(timeout=10)[1].decode(errors='replace').strip()}")
        for kind in ("uid", "gid"):
            with open(f"/proc/{helper.pid}/{kind}_map", "w") as handle:
                handle.write(f"{FIRST} {FIRST} {COUNT}\n")
        return os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        helper.stdin.close()
        helper.wait(timeout=10)
