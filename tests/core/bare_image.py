"""A bare task image for the docker tests, built locally ``FROM scratch`` (nothing pulled):
busybox-static, this machine's bash and the shared libraries bash loads (``rootfs.py`` with
``python=False, bash=True``), ``WORKDIR /app``. No node and no Python, like the images of
Terminal-Bench tasks that ship neither. Tagged by the rootfs fingerprint, so it is built once
per engine and host."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from agentmeter_tui.core.sandboxes.archive import TarWriter
from agentmeter_tui.core.sandboxes.docker.images import IMAGE_LABELS
from agentmeter_tui.core.sandboxes.docker.rootfs import build_rootfs, host_fingerprint

REPOSITORY = "agentmeter-test/bare"
# What the image must not have: a runtime of its own for any CLI.
RUNTIMES = ("node", "nodejs", "bun", "deno", "python", "python3")
DOCKERFILE = b'FROM scratch\nADD rootfs.tar /\nENV PATH=/usr/bin:/bin LANG=C.UTF-8\nWORKDIR /app\nCMD ["bash"]\n'


def bare_image(client, *, bash: bool = True) -> str:
    """The image's tag on ``client``'s engine, built when missing. Without ``bash`` it is
    busybox-static alone: no libc, no loader, no shared library at all."""
    repository = REPOSITORY if bash else f"{REPOSITORY}-nolibc"
    tag = f"{repository}:{host_fingerprint(python=False, bash=bash)}"
    if not client.images.list(name=tag):
        with tempfile.TemporaryDirectory(prefix="agentmeter-bare-") as tmp:
            rootfs = build_rootfs(Path(tmp) / "rootfs.tar", python=False, bash=bash)
            context = io.BytesIO()
            tar = TarWriter(context)
            tar.data("Dockerfile", DOCKERFILE)
            tar.file("rootfs.tar", rootfs)
            tar.close()
            context.seek(0)
            client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                                labels=IMAGE_LABELS)
    return tag


def runtimes_in(client, image: str) -> str:
    """What the image answers when asked for any CLI runtime (empty: it has none)."""
    probe = " ".join(RUNTIMES)
    script = (f"for p in {probe}; do command -v $p; done; "
              "ls -d /usr/lib/python3* /usr/local/lib/python3* /usr/lib/node_modules /usr/lib/*/libnode* 2>/dev/null; "
              "true")
    return client.containers.run(image, ["bash", "-c", script], remove=True, network_mode="none").decode()
