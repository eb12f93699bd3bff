"""Which image a task's container runs, and getting it onto an engine without a registry.

In order, a task runs:

1. ``[environment] docker_image`` of its ``task.toml`` (Harbor's key) when that image is on
   the engine already;
2. an image built locally from its ``environment/Dockerfile`` (the build context is the
   ``environment/`` folder; tagged by the context's hash, so it is built once);
3. an image loaded from ``environment/image.tar`` (a ``docker save`` archive) or imported
   from it (a plain root filesystem tar);
4. the suite's ``[sandbox] image``; the default, ``agentmeter/host``, is built on demand
   from this machine's own files (busybox-static and python3, see ``rootfs.py``).

Nothing is pulled unless the suite sets ``pull = true``: no registry is assumed reachable,
and a missing image is an error that says how to build or load it.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import threading
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..archive import TarWriter
from .rootfs import PATH, build_rootfs, host_fingerprint

if TYPE_CHECKING:
    from ...suites.suite import Task

HOST_IMAGE = "agentmeter/host"
# Images built from this machine's files, by name: rootfs options. ``host-bash`` adds bash, which
# Harbor-format tasks need (their tests run as ``bash /tests/test.sh``).
WALL_IMAGE = "agentmeter/wall"  # the swarm nodes' wall and relay (``nodewall.py``): python and iptables
BASE_IMAGES = {HOST_IMAGE: {"python": True}, "agentmeter/host-bash": {"python": True, "bash": True},
               WALL_IMAGE: {"python": True, "iptables": True}}
IMAGE_LABELS = {"agentmeter.image": "1"}  # images are caches: `doctor --clean` leaves them


class ImageError(RuntimeError):
    """An image that cannot be had. ``task`` is set when it is one task's own image (its
    Dockerfile, archive or ``docker_image``): that task's trials fail, the run goes on."""

    def __init__(self, message: str, task: str | None = None):
        super().__init__(message)
        self.task = task
        # A task's own image that failed fails the same way again (it is cached as failed):
        # its trials end with the reason once, never retried (a retry would only repeat it).
        self.final = task is not None


def context_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:12]


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text.lower()).strip("-.") or "task"


class ImageResolver:
    """Resolves (and builds or loads, once per engine) the image of each task."""

    def __init__(self, default_image: str, *, pull: bool = False,
                 on_progress: Callable[[str], None] = lambda text: None):
        self.default_image = default_image
        self.pull = pull
        self.on_progress = on_progress  # a build's steps as they go (called on the build's thread)
        # what a resolved image becomes for the trials (the docker sandbox: the agent's user added)
        self.derive: Callable[[Any, str, Task], str] = lambda client, image, task: image
        self._resolved: dict[tuple[str, str], str] = {}
        self._failed: dict[tuple[str, str], ImageError] = {}  # a broken Dockerfile is built once, not per trial
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def resolve(self, client: Any, engine: str, suite_id: str, task: Task) -> str:
        """The image reference for ``task`` on ``engine`` (blocking: run it in a thread)."""
        key = (engine, f"{suite_id}/{task.id}")
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._failed:
                raise self._failed[key]
            if key not in self._resolved:
                try:
                    self._resolved[key] = self._derived(client, self._resolve(client, engine, task), task)
                except ImageError as exc:
                    if exc.task is not None:
                        self._failed[key] = exc
                    raise
            return self._resolved[key]

    def _derived(self, client: Any, image: str, task: Task) -> str:
        try:
            return self.derive(client, image, task)
        except Exception as exc:  # noqa: BLE001 - the SDK raises several kinds; that task fails, with why
            raise ImageError(f"task '{task.id}': adding the agent's user to image {image} failed: {exc}",
                             task.id) from None

    def _resolve(self, client: Any, engine: str, task: Task) -> str:
        env_dir = task.path / "environment"
        named = task.spec.environment.docker_image
        if isinstance(named, str) and named and _present(client, named):
            return named
        if (env_dir / "Dockerfile").is_file():
            # Named by the task and its context's hash: the same folder in any suite is one image.
            tag = f"agentmeter-task/{_safe_name(task.id)}:{context_hash(env_dir)}"
            if not _present(client, tag):
                self._build(client, env_dir, tag, task, engine)
            return tag
        for tarball in (env_dir / "image.tar", env_dir / "image.tar.gz"):
            if tarball.is_file():
                try:
                    return self._load(client, tarball, f"agentmeter-task/{_safe_name(task.id)}", engine)
                except ImageError as exc:
                    raise ImageError(f"task '{task.id}': {exc}", task.id) from None
        if isinstance(named, str) and named:
            try:
                return self.ensure_named(client, named, engine, where=f"{task.path.name}/task.toml [environment]")
            except ImageError as exc:
                raise ImageError(f"task '{task.id}': {exc}", task.id) from None
        return self.ensure_named(client, self.default_image, engine, where="suite.toml [sandbox] image")

    def ensure_named(self, client: Any, name: str, engine: str, *, where: str) -> str:
        if name.partition(":")[0] in BASE_IMAGES:
            return ensure_host_image(client, name.partition(":")[0])
        if _present(client, name):
            return name
        if not self.pull:
            raise ImageError(
                f"image '{name}' ({where}) is not on the docker engine {engine}, and agentmeter never pulls "
                f"from a registry unless [sandbox] pull = true (none is assumed reachable); build it "
                f"(docker build -t {name} ...), load it (docker load -i IMAGE.tar), or give the task an "
                f"environment/Dockerfile")
        try:
            repository, _, tag = name.partition(":")
            client.images.pull(repository, tag=tag or "latest")
        except Exception as exc:  # noqa: BLE001 - the SDK raises several kinds; all mean the same here
            raise ImageError(f"pulling image '{name}' ({where}) on {engine} failed: the registry is not "
                             f"reachable or refused it ({exc}); build or load the image instead") from None
        return name

    def _build(self, client: Any, context: Path, tag: str, task: Task, engine: str) -> None:
        from docker.errors import APIError, BuildError
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import Timeout

        dockerfile = context / "Dockerfile"
        where = f"{task.path.name}/environment/Dockerfile"
        timeout = task.spec.environment.build_timeout_sec
        ensure_bases(client, dockerfile)
        self.on_progress(f"building the image of task {task.id} ({where})")
        try:
            build_streaming(client, lambda line: self.on_progress(f"building the image of task {task.id}: {line}"),
                            path=str(context), tag=tag, timeout=timeout)
        except (BuildError, APIError) as exc:
            raise ImageError(build_failure(task.id, where, engine, dockerfile, exc), task.id) from None
        except (Timeout, RequestsConnectionError) as exc:  # the HTTP read timed out: [environment] build_timeout_sec
            raise ImageError(f"task '{task.id}': building {where} on {engine} took longer than "
                             f"[environment] build_timeout_sec = {timeout:g} s ({exc})", task.id) from None

    def _load(self, client: Any, tarball: Path, repository: str, engine: str) -> str:
        import tarfile

        with tarfile.open(tarball) as tar:
            is_saved_image = any(m.name in ("manifest.json", "./manifest.json") for m in tar.getmembers())
        tag = f"{repository}:{context_hash(tarball.parent)}"
        if _present(client, tag):
            return tag
        with tarball.open("rb") as handle:
            if is_saved_image:
                images = client.images.load(handle.read())
                if not images:
                    raise ImageError(f"{tarball.name}: the archive holds no image")
                images[0].tag(*tag.split(":", 1))
            else:  # a root filesystem: what `docker import` takes
                client.api.import_image_from_data(handle.read(), repository=repository, tag=tag.split(":", 1)[1])
        return tag


def build_streaming(client: Any, step: Callable[[str], None], **options: Any) -> None:
    """``client.images.build`` with each build step told to ``step`` as it starts (the SDK's
    own call returns only at the end, and a build can take minutes); raises ``BuildError``
    with the build's log as the SDK's does."""
    from docker.errors import BuildError

    log: list[dict[str, Any]] = []
    for chunk in client.api.build(rm=True, forcerm=True, pull=False, labels=IMAGE_LABELS, decode=True, **options):
        log.append(chunk)
        if "error" in chunk:
            raise BuildError(chunk["error"], log)
        line = chunk.get("stream", "")
        if line.startswith("Step "):
            step(" ".join(line.split())[:160])
    if not any("aux" in c or "Successfully built" in c.get("stream", "") for c in log):
        raise BuildError("the build ended without an image", log)


ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-_])")
BASE_MISSING = ("pull access denied", "manifest unknown", "repository does not exist", "no such image",
                "not found: manifest", "failed to resolve")
STEP_TAIL = 8  # lines of the failing step's output the error quotes


def build_failure(task_id: str, where: str, engine: str, dockerfile: Path, exc: Exception) -> str:
    """One clear error for a failed build: the failing step (its Dockerfile line and
    instruction), the builder's error and the last lines that step printed, escape codes
    stripped; the base-image hint only when a base image is what was missing."""
    log = ESCAPES.sub("", "".join(item.get("stream", "") for item in getattr(exc, "build_log", []) or []))
    error = " ".join(ESCAPES.sub("", str(getattr(exc, "msg", None) or exc)).split())
    line = failed_line(dockerfile, log)
    step, output = failed_step(log)
    text = f"task '{task_id}': building {where}{f':{line}' if line else ''} on {engine} failed"
    text += f" at {step}" if step else ""
    text += f": {error}"
    if any(cause in error.lower() for cause in BASE_MISSING):
        text += ". Its base image must already be on the engine (agentmeter never pulls): build or load it first"
    if output:
        text += "; the step's last output: " + " | ".join(output[-STEP_TAIL:])
    return text


def failed_step(log: str) -> tuple[str | None, list[str]]:
    """The last ``Step N/M : INSTRUCTION`` of a classic build log and the lines it printed
    (the builder's own ``--->`` lines left out)."""
    step: str | None = None
    output: list[str] = []
    for raw in log.splitlines():
        text = raw.strip()
        if raw.startswith("Step ") and " : " in raw:
            step, output = " ".join(text.split(" : ", 1)[1].split())[:120], []
        elif text and not text.startswith("--->") and not text.startswith("Removing intermediate"):
            output.append(text[:300])
    return step, output


def failed_line(dockerfile: Path, log: str) -> int | None:
    """The Dockerfile line of the build step that failed: the last ``Step N/M : INSTRUCTION``
    the classic builder printed, found in the file (its first line, for continued ones)."""
    steps = [line.split(" : ", 1)[1].strip() for line in log.splitlines()
             if line.startswith("Step ") and " : " in line]
    if not steps:
        return None
    head = steps[-1].split("\n")[0][:60].lower()
    for number, line in enumerate(dockerfile.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.strip() and " ".join(line.split()).lower().startswith(" ".join(head.split())[:40]):
            return number
    return None


def _present(client: Any, name: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(name)
        return True
    except ImageNotFound:
        return False


_host_lock = threading.Lock()


def ensure_host_image(client: Any, name: str = HOST_IMAGE) -> str:
    """``agentmeter/host:<fingerprint>`` (or another of ``BASE_IMAGES``): built once per engine
    from this machine's files, and tagged ``:latest`` too, so a task's environment/Dockerfile
    can say ``FROM agentmeter/host``."""
    options = BASE_IMAGES[name]
    with _host_lock:
        tag = f"{name}:{host_fingerprint(**options)}"
        if not _present(client, tag):
            _build_host_image(client, tag, options)
        client.images.get(tag).tag(name, "latest")
        return tag


def ensure_bases(client: Any, dockerfile: Path) -> None:
    """Build the base images of ours a Dockerfile starts ``FROM`` (nothing is ever pulled)."""
    for line in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "FROM" and words[1].partition(":")[0] in BASE_IMAGES:
            ensure_host_image(client, words[1].partition(":")[0])


def _build_host_image(client: Any, tag: str, options: dict[str, bool]) -> None:
    with tempfile.TemporaryDirectory(prefix="agentmeter-rootfs-") as tmp:
        rootfs = build_rootfs(Path(tmp) / "rootfs.tar", **options)
        dockerfile = f'FROM scratch\nADD rootfs.tar /\nENV PATH={PATH} LANG=C.UTF-8\nCMD ["sh"]\n'.encode()
        with (Path(tmp) / "context.tar").open("wb") as handle:
            context = TarWriter(handle)
            context.data("Dockerfile", dockerfile)
            context.file("rootfs.tar", rootfs)
            context.close()
        with (Path(tmp) / "context.tar").open("rb") as handle:
            client.images.build(fileobj=handle, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                                labels=IMAGE_LABELS)
