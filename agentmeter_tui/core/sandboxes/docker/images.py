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
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..archive import TarWriter
from .rootfs import PATH, build_rootfs, host_fingerprint

if TYPE_CHECKING:
    from ...suites import Task

HOST_IMAGE = "agentmeter/host"
IMAGE_LABELS = {"agentmeter.image": "1"}  # images are caches: `doctor --clean` leaves them


class ImageError(RuntimeError):
    pass


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

    def __init__(self, default_image: str, *, pull: bool = False):
        self.default_image = default_image
        self.pull = pull
        self._resolved: dict[tuple[str, str], str] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def resolve(self, client: Any, engine: str, suite_id: str, task: Task) -> str:
        """The image reference for ``task`` on ``engine`` (blocking: run it in a thread)."""
        key = (engine, f"{suite_id}/{task.id}")
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._resolved:
                self._resolved[key] = self._resolve(client, engine, task)
            return self._resolved[key]

    def _resolve(self, client: Any, engine: str, task: Task) -> str:
        env_dir = task.path / "environment"
        named = task.spec.environment.get("docker_image")
        if isinstance(named, str) and named and _present(client, named):
            return named
        if (env_dir / "Dockerfile").is_file():
            # Named by the task and its context's hash: the same folder in any suite is one image.
            tag = f"agentmeter-task/{_safe_name(task.id)}:{context_hash(env_dir)}"
            if not _present(client, tag):
                self._build(client, env_dir, tag, f"{task.path.name}/environment/Dockerfile", engine)
            return tag
        for tarball in (env_dir / "image.tar", env_dir / "image.tar.gz"):
            if tarball.is_file():
                return self._load(client, tarball, f"agentmeter-task/{_safe_name(task.id)}", engine)
        if isinstance(named, str) and named:
            return self.ensure_named(client, named, engine, where=f"{task.path.name}/task.toml [environment]")
        return self.ensure_named(client, self.default_image, engine, where="suite.toml [sandbox] image")

    def ensure_named(self, client: Any, name: str, engine: str, *, where: str) -> str:
        if name == HOST_IMAGE or name.startswith(HOST_IMAGE + ":"):
            return ensure_host_image(client)
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

    def _build(self, client: Any, context: Path, tag: str, where: str, engine: str) -> None:
        from docker.errors import APIError, BuildError

        try:
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False, labels=IMAGE_LABELS)
        except (BuildError, APIError) as exc:
            log = "".join(item.get("stream", "") for item in getattr(exc, "build_log", []) or [])[-2000:]
            raise ImageError(f"building {where} on {engine} failed: {exc}. Its base image must already be on "
                             f"the engine (agentmeter never pulls).\n{log}") from None

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


def _present(client: Any, name: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(name)
        return True
    except ImageNotFound:
        return False


_host_lock = threading.Lock()


def ensure_host_image(client: Any) -> str:
    """``agentmeter/host:<fingerprint>``: built once per engine from this machine's files, and
    tagged ``:latest`` too, so a task's environment/Dockerfile can say ``FROM agentmeter/host``."""
    with _host_lock:
        tag = f"{HOST_IMAGE}:{host_fingerprint()}"
        if not _present(client, tag):
            _build_host_image(client, tag)
        client.images.get(tag).tag(HOST_IMAGE, "latest")
        return tag


def _build_host_image(client: Any, tag: str) -> None:
    with tempfile.TemporaryDirectory(prefix="agentmeter-rootfs-") as tmp:
        rootfs = build_rootfs(Path(tmp) / "rootfs.tar")
        dockerfile = f'FROM scratch\nADD rootfs.tar /\nENV PATH={PATH} LANG=C.UTF-8\nCMD ["sh"]\n'.encode()
        with (Path(tmp) / "context.tar").open("wb") as handle:
            context = TarWriter(handle)
            context.data("Dockerfile", dockerfile)
            context.file("rootfs.tar", rootfs)
            context.close()
        with (Path(tmp) / "context.tar").open("rb") as handle:
            client.images.build(fileobj=handle, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                                labels=IMAGE_LABELS)
