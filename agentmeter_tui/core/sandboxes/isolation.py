"""The local sandbox's walls: each trial's processes under Debian's ``bubblewrap`` (``bwrap``).

What the agent (and the verifier, which runs in the trial's sandbox too) gets:

- its own pid namespace and a fresh ``/proc``: it sees its own processes only, so neither
  the runner's environment (``/proc/<pid>/environ``: provider keys, the operator's variables)
  nor another trial's; when its first process ends the kernel ends every other one;
- its own mount namespace, whose root is an empty tmpfs: the system folders (``/usr``,
  ``/etc``...) bound read-only, plus exactly what its command needs (the CLIs' install root,
  the Python the reference agent runs on and our own package folder, the files its argv
  names), and its trial's workspace, HOME, tmp and scratch read-write. The store, the
  runner's files, its control socket and every other folder of this machine are not there;
  a private tmpfs stands at ``/tmp``. Binding into an empty root also means a folder the
  agent's uid could not traverse on the host (a checkout under a 0700 home) does not matter;
- its own ipc and uts namespaces, a new session, and death with the runner;
- when the runner is root, a uid of its own (:mod:`.uidpool`): bwrap becomes it in the
  runner's user namespace that maps the pool's uids to themselves (:mod:`.userns`), or, where
  that cannot be had or the view's sources are out of that uid's reach, ``unshare -G -S`` or
  ``setpriv`` does inside the sandbox (:func:`_drop`); either way no capability is left and no
  new privilege can be had. A runner that is not root gives a user namespace that keeps its
  uid (the namespaces hide the runner's processes and files, but files the agent can reach
  are its user's: the uid wall needs root).

- its own network namespace, holding only its loopback (:mod:`.netns`): as root one the
  runner made and entered for the spawn, with the runner's listener at its model's port;
  otherwise bwrap's ``--unshare-net`` where it has no model on this machine.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..paths import PACKAGE_ROOT
from . import userns
from .netns import NetPool
from .rootpool import FOLDERS as BOUND  # a trial root's folders: the agent writes there
from .uidpool import FIRST

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
SYSTEM_BIN = ("/usr/local/bin", "/usr/bin", "/bin")
OWN_MOUNTS = ("/proc/", "/dev/")  # the sandbox's own: a file there named in argv is its, never the host's
NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-uts")
# programs that start others named on their command line or in a script (their own or one
# they read): they may start our Python by any name
LAUNCHERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "env", "timeout", "nice", "nohup",
                       "setsid", "stdbuf", "xargs", "time", "script", "sudo", "chroot", "unshare", "setpriv",
                       "make", "node", "perl", "ruby", "uv", "uvx", "pipx", "npx"})
RELAY = str(PACKAGE_ROOT / "core" / "sandboxes" / "netrelay.py")  # run by its path: no import of ours
AGENT_USER = "agent"  # the name of a trial's own uid in its passwd


def bwrap() -> str | None:
    """The ``bwrap`` on PATH (looked up at each run's start: a test hides it by PATH)."""
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def probe(program: str) -> str | None:
    """Why namespaces cannot be had here (None: they can). Once per runner and program: one
    sandbox as trials get it, running ``true``."""
    argv = [program, *_base(), "--unshare-net", *_system(), "--", "/bin/true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{program}: {exc}"
    if done.returncode != 0:  # bwrap's last line says why (its own words, quoted as text)
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{program}: {said[-1] if said else f'exited {done.returncode}'}"
    return None


@functools.lru_cache(maxsize=4)
def pool_namespace(program: str) -> int | None:
    """The runner's user namespace (:mod:`.userns`) if bwrap ``program`` starts a sandbox in
    it as trials get it (None: not root, no user namespace, or a bwrap that cannot: trials get
    the exec drop). Tried once per runner and program."""
    handle = userns.pool_namespace()
    if handle is None:
        return None
    argv = [program, *_as(handle, FIRST), *_base(), "--unshare-net", *_system(), "--", "/bin/true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              pass_fds=(handle,), timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return handle if done.returncode == 0 else None


def _as(handle: int, uid: int) -> list[str]:
    return ["--userns", str(handle), "--uid", str(uid), "--gid", str(uid)]


def _base() -> list[str]:
    user = [] if os.geteuid() == 0 else ["--unshare-user"]  # not root: a user namespace, same uid
    return [*user, *NAMESPACES, "--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--tmpfs", "/tmp"]


@functools.cache
def _system() -> tuple[str, ...]:
    """The system folders read-only (a merged-/usr link stays a link)."""
    out: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    return tuple(out)


@functools.cache
def _python() -> tuple[str, ...]:
    """The folders the reference agent's Python needs: its prefixes and our package folder
    (for an editable install, not the checkout above it, which may hold the store)."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(PACKAGE_ROOT)}
    return tuple(sorted(os.path.realpath(p) for p in found) + sorted(found))


@functools.lru_cache(maxsize=16)
def tool_folders(root: str) -> tuple[str, ...]:
    """An install root of agent CLIs, and the interpreters its virtual environments link to
    outside it (a ``bin/python`` that points at another prefix). Read once per runner."""
    found = [root, os.path.realpath(root)]
    for link in Path(root).glob("*/bin/python*"):
        target = os.path.realpath(link)
        if link.is_symlink() and not target.startswith(os.path.realpath(root) + "/"):
            found.append(str(Path(target).parent.parent))
    return tuple(dict.fromkeys(p for p in found if os.path.isdir(p)))


@functools.lru_cache(maxsize=64)
def interpreter_folders(program: str) -> tuple[str, ...]:
    """What a script's ``#!`` line needs outside the system: for ``PREFIX/bin/python`` (a
    virtual environment's entry point) the environment and the prefix its python links to."""
    try:
        with open(program, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return ()
    if not head.startswith(b"#!"):
        return ()
    words = head[2:].split(b"\n", 1)[0].split()
    interpreter = words[0].decode(errors="replace") if words else ""
    if not interpreter.startswith("/") or _system_path(interpreter) or not os.path.exists(interpreter):
        return ()
    found = [os.path.dirname(interpreter)]
    for path in (interpreter, os.path.realpath(interpreter)):
        if os.path.basename(os.path.dirname(path)) == "bin":
            found.append(os.path.dirname(os.path.dirname(path)))
    return tuple(dict.fromkeys(found))


class View:
    """The bwrap options of one trial's filesystem view, built in mount order: every folder
    leading to a bind is made 0755 first (bwrap would make it 0700, which the agent's uid
    cannot pass). ``base``: a view to go on from (:func:`_host_view`)."""

    def __init__(self, base: View | None = None) -> None:
        self.args: list[str] = list(base.args) if base else []
        self.made: set[str] = set(base.made) if base else {"/", "/tmp"}
        self.bound: list[str] = list(base.bound) if base else []
        self.sources: list[str] = list(base.sources) if base else []  # what bwrap looks up on the host
        self.passable: bool = base.passable if base else True  # the base's sources: any uid reaches them

    def _parents(self, path: str) -> None:
        parts = Path(path).parts
        for depth in range(2, len(parts)):
            folder = str(Path(*parts[:depth]))
            if folder not in self.made and not self._covered(folder):
                self.args += ["--perms", "0755", "--dir", folder]
                self.made.add(folder)

    def _covered(self, path: str) -> bool:
        return any(path == b or path.startswith(b.rstrip("/") + "/") for b in self.bound)

    def bind(self, path: str, *, write: bool = False) -> None:
        if self._covered(path) and not write:
            return
        self._parents(path)
        self.args += ["--bind" if write else "--ro-bind", path, path]
        self.bound.append(path)
        self.made.add(path)
        self.sources.append(path)

    def file(self, source: str, dest: str) -> None:
        self._parents(dest)
        self.args += ["--ro-bind", source, dest]
        self.sources.append(source)

    def reachable(self, uid: int, skip: int = 0) -> bool:
        """Whether ``uid`` can look up every source after the first ``skip`` (bwrap does, as
        that uid, in the runner's user namespace)."""
        return all(_passable(source, uid) for source in self.sources[skip:])


@functools.lru_cache(maxsize=64)
def _host_view(python: tuple[str, ...], tools: tuple[str, ...], needs: tuple[str, ...]) -> View:
    """The part of a view every trial of a runner shares (our Python when the command may run
    it, the CLIs' roots, what an interpreter needs): built once per command kind, copied per
    trial (never changed)."""
    view = View()
    for folder in (*python, *(f for tool in tools for f in tool_folders(tool)), *needs):
        if not _system_path(folder):
            view.bind(folder)
    view.passable = view.reachable(-1)  # no trial's uid owns a folder of these
    return view


def argv_for(program: str, command: list[str], *, root: Path, cwd: str, tools: tuple[str, ...],
             uid: int | None, net: bool = False, relay: tuple[str, ...] = (), space: int | None = None) -> list[str]:
    """``command`` in a trial's sandbox: bwrap's options, then (as root) the trial's uid, then
    the command. ``root`` holds the trial's folders and its passwd/group. ``net``: bwrap makes
    a network namespace of its own (the caller did not spawn it in one: :mod:`.netns`);
    ``relay``: the arguments of :mod:`.netrelay`, which runs first, on our Python, and then
    becomes the command. ``space``: the runner's user namespace (:func:`pool_namespace`),
    passed to bwrap by the caller: bwrap becomes the uid in it where the uid can reach every
    source of the view, and the exec drop (:func:`_drop`) does otherwise.

    Each mount costs bwrap about 0.1 ms (it rereads the mount table for each), so the view
    has as few as the walls allow (benchmarks/containment.py): with a uid of its own, the
    trial's root is one bind (the root is the runner's, mode 0750, group the trial's: the
    agent passes it but writes only in its folders, which are its own). With the exec drop
    nothing needs the empty root made read-only (bwrap made it and its folders as root,
    0755); where bwrap became the uid first they are the agent's, and the root is made
    read-only. Without a uid of its own the agent owns the root and bwrap's folders too:
    each folder is bound alone, and the root made read-only."""
    exe = shutil.which(command[0], path=os.pathsep.join(SYSTEM_BIN)) if "/" not in command[0] else command[0]
    real = os.path.realpath(exe) if exe else ""
    python = _python() if relay or _may_run_python(command, real) else ()
    shared = _host_view(python, tools, interpreter_folders(real) if exe else ())
    view = View(shared)
    for arg in command:
        value = arg.partition("=")[2] if arg.startswith("-") else arg
        if value.startswith("/") and not _system_path(value) and not value.startswith(f"{root}/") \
                and not value.startswith(OWN_MOUNTS) and os.path.isfile(value):
            view.bind(os.path.realpath(value))
            if os.path.realpath(value) != value:
                view.bind(value)
    for folder in [str(root)] if uid is not None else [str(root / name) for name in BOUND]:
        view.bind(folder, write=True)
    view.file(str(root / "passwd"), "/etc/passwd")
    view.file(str(root / "group"), "/etc/group")
    own = uid is not None and space is not None and view.passable and view.reachable(uid, len(shared.sources))
    # bwrap made the view as the uid (own): the root and the folders it made are the agent's
    seal = [] if uid is not None and not own else ["--remount-ro", "/"]
    unshare = ["--unshare-net"] if net else []
    # -S -E: no site, no PYTHON* variables: the relay needs the standard library only, and
    # starts in half the time (16 ms here, 34 with site's .pth files)
    wrapper = [sys.executable, "-S", "-E", RELAY, *relay, "--"] if relay else []
    become, drop = (_as(space, uid), []) if own and space is not None and uid is not None else ([], _drop(uid))
    return [program, *become, *_base(), *unshare, *_system(), *view.args, *seal, "--chdir", cwd, "--", *drop,
            *wrapper, *command]


def _may_run_python(command: list[str], real: str) -> bool:
    """Whether ``command`` may start our Python (the reference agent, a verifier's script): all
    but a native program of its own (``/bin/true``, ``cat``, a compiled CLI) that names none of
    our Python's folders; a shell or a launcher may start anything, a script may be Python.
    Three binds fewer for the others, each 0.1 ms of bwrap's (:func:`argv_for`)."""
    if os.path.basename(real) in LAUNCHERS or os.path.basename(real).startswith("python"):
        return True
    if any(arg.startswith(prefix) for arg in command for prefix in _python()) or real.startswith(_python()):
        return True
    return not _native(real)


@functools.lru_cache(maxsize=64)
def _native(program: str) -> bool:
    try:
        with open(program, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def _drop(uid: int | None) -> list[str]:
    """The command that becomes the trial's uid inside the sandbox (nothing: it has none).
    util-linux's ``unshare -G -S``: setgroups to none, setgid, setuid, by number,
    which leaves a non-root uid no capability (the kernel clears them at setuid; the bounding
    set it keeps is inert: bwrap sets no_new_privs and every mount of the view is nosuid, so
    no exec regains one). It costs half what ``setpriv`` does (no NSS lookup of the number,
    no libcap-ng: about 0.5 ms a trial); an older util-linux, whose unshare lacks ``-S``, gets setpriv."""
    if uid is None:
        return []
    unshare, setpriv = _droppers()
    if unshare:
        return [unshare, f"--setgid={uid}", f"--setuid={uid}", "--"]
    return [setpriv or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


@functools.cache
def _droppers() -> tuple[str | None, str | None]:
    """``unshare`` when it knows ``--setuid`` (read once from its help), and ``setpriv``."""
    search = os.pathsep.join(SYSTEM_BIN)
    unshare = shutil.which("unshare", path=search)
    if unshare is not None:
        try:
            helps = subprocess.run([unshare, "--help"], capture_output=True, text=True, timeout=10, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            helps = ""
        unshare = unshare if "--setuid" in helps and "--setgid" in helps else None
    return unshare, shutil.which("setpriv", path=search)


def _passable(path: str, uid: int) -> bool:
    """Whether ``uid`` (a trial's, with no supplementary group) can look ``path`` up."""
    return _blocker(path, uid) is None


def _blocker(path: str, uid: int) -> str | None:
    """The first folder above ``path`` (as written, then as resolved) that ``uid`` cannot pass
    as owner, group or other; None: it passes them all."""
    for name in dict.fromkeys((path, os.path.realpath(path))):
        folder = os.path.dirname(name)
        while True:
            try:
                info = os.stat(folder)
            except OSError:
                return folder
            who = 0o100 if info.st_uid == uid else 0o010 if info.st_gid == uid else 0o001
            if not info.st_mode & who:
                return folder
            if folder == "/":
                break
            folder = os.path.dirname(folder)
    return None


def blocked(tools: tuple[str, ...], roots: Path) -> tuple[str, str] | None:
    """What sends a root runner's CLI trials to the exec drop (``agentmeter doctor``): the first
    source of their view (our Python's folders, the CLIs' roots and the interpreters they link
    to, a trial root in ``roots``) that a trial's uid cannot look up, and the folder in the way;
    None: bwrap can become the uid for them."""
    for source in (*_host_view(_python(), tools, ()).sources, str(roots / "t0")):
        if (folder := _blocker(source, FIRST)) is not None:
            return source, folder
    return None


def _system_path(path: str) -> bool:
    return any(path == s or path.startswith(s + "/") for s in SYSTEM)


class Walls:
    """One trial's walls: ``program`` is bwrap (None: ``isolation = "none"``), ``uid`` the uid
    of its own (None: the runner's, when the runner is not root), ``tools`` the CLIs' roots,
    ``net`` the runner's pool of network namespaces and ``namespace`` the trial's (None: not
    root, bwrap makes one where the trial has no model on this machine), ``space`` the user
    namespace bwrap becomes the uid in (None: the exec drop does)."""

    def __init__(self, program: str | None, uid: int | None, tools: tuple[str, ...], give_back=None,
                 net: NetPool | None = None):
        self.program, self.uid, self.tools = program, uid, tools
        self._give_back = give_back
        self.net = net
        self.namespace = net.take() if net is not None else None
        self.space = pool_namespace(program) if program is not None and uid is not None else None

    @property
    def fds(self) -> tuple[int, ...]:
        """What bwrap's spawn passes on (the user namespace: bwrap does not close it, and the
        agent holding it gains nothing, as it has no capability there)."""
        return (self.space,) if self.space is not None else ()

    def describe(self) -> str:
        if self.program is None:
            return ('isolation: none (the suite says isolation = "none"): the agent runs as the runner\'s user '
                    "and sees its processes, environment and files, and reaches every address of this machine")
        who = f"uid {self.uid} of its own" if self.uid is not None else "the runner's uid (not root: no uid of its own)"
        return f"isolation: bwrap (pid, mount, ipc, uts and network namespaces; the host read-only but its folders), {who}"

    def release(self) -> None:
        """The uid and the network namespace go back to their pools (the trial's processes are gone)."""
        if self._give_back is not None and self.uid is not None:
            self._give_back(self.uid)
            self._give_back = None
        if self.net is not None and self.namespace is not None:
            self.net.give_back(self.namespace)
            self.namespace = None
