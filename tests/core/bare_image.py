"""A bare task image for the docker tests, built locally ``FROM scratch`` (nothing pulled):
busybox-static, this machine's bash and the shared libraries bash loads, ``WORKDIR /app``.
No node and no Python, like the images of Terminal-Bench tasks that ship neither. Built once
per engine and content (the tag is a hash of the files that go in), so sessions reuse it."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
from pathlib import Path

from agentmeter_tui.core.sandboxes.archive import TarWriter
from agentmeter_tui.core.sandboxes.docker.images import IMAGE_LABELS
from agentmeter_tui.core.sandboxes.docker.rootfs import AGENT_UID, find_busybox, shared_libraries

REPOSITORY = "agentmeter-test/bare"
# What the image must not have: a runtime of its own for any CLI.
RUNTIMES = ("node", "nodejs", "bun", "deno", "python", "python3")


def _files() -> list[Path]:
    bash = Path(shutil.which("bash") or "/bin/bash").resolve()
    return [find_busybox(), bash, *shared_libraries([bash])]


def bare_image(client) -> str:
    """The image's tag on ``client``'s engine, built when missing."""
    digest = hashlib.sha256(b"bare-v2")
    for path in _files():
        stat = path.resolve().stat()
        digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    tag = f"{REPOSITORY}:{digest.hexdigest()[:12]}"
    if not client.images.list(name=tag):
        _build(client, tag)
    return tag


def _build(client, tag: str) -> None:
    busybox, bash, *libraries = _files()
    applets = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, check=True).stdout.split()
    rootfs = io.BytesIO()
    tar = TarWriter(rootfs)
    for name, mode in (("tmp", 0o1777), ("etc", 0o755), ("root", 0o700), ("app", 0o755), ("usr/bin", 0o755)):
        tar.folder(name, mode)
    tar.folder("home/agent", 0o755, AGENT_UID)
    tar.file("bin/busybox", busybox)
    tar.file("bin/bash", bash)
    for applet in sorted({a.strip("/") for a in applets} - {"bin/busybox", "bin/bash"}):
        tar.link(applet, "/bin/busybox")
    for library in libraries:
        tar.file(str(library).lstrip("/"), library.resolve())
    tar.data("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\nagent:x:%d:%d:agent:/home/agent:/bin/bash\n"
             % (AGENT_UID, AGENT_UID))
    tar.data("etc/group", b"root:x:0:\nagent:x:%d:\n" % AGENT_UID)
    tar.close()
    dockerfile = b'FROM scratch\nADD rootfs.tar /\nENV PATH=/usr/bin:/bin LANG=C.UTF-8\nWORKDIR /app\nCMD ["bash"]\n'
    context = io.BytesIO()
    outer = TarWriter(context)
    outer.data("Dockerfile", dockerfile)
    outer.data("rootfs.tar", rootfs.getvalue())
    outer.close()
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                        labels=IMAGE_LABELS)


def runtimes_in(client, image: str) -> str:
    """What the image answers when asked for any CLI runtime (empty: it has none)."""
    probe = " ".join(RUNTIMES)
    script = (f"for p in {probe}; do command -v $p; done; "
              "ls -d /usr/lib/python3* /usr/local/lib/python3* /usr/lib/node_modules /usr/lib/*/libnode* 2>/dev/null; "
              "true")
    return client.containers.run(image, ["bash", "-c", script], remove=True, network_mode="none").decode()
