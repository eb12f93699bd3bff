"""The agent's user in any task image: a passwd and group entry for the uid it runs as.

Our own images have an ``agent`` user (uid 1000, ``rootfs.py``), but a task image built from
a Debian or Alpine base usually has no entry for uid 1000; then ``getpwuid`` fails and a CLI
that asks who it is dies at start (Qwen Code: ``uv_os_get_passwd returned ENOENT`` from
node's ``os.userInfo()``). So when the image has no entry for the agent's uid, its trials run
on a thin image made from it: ``FROM`` the task's image with ``/etc/passwd`` and
``/etc/group`` copied in as the image's own plus one line each (``agent``, HOME the trial's
home folder). The task's image itself is not changed, nor anything else that runs it; the
derived image is tagged by what it is made of, so it is made once per engine.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from typing import Any

from ..archive import TarWriter
from .images import IMAGE_LABELS

USER_REPOSITORY = "agentmeter-user"


def image_files(client: Any, image: str, paths: tuple[str, ...]) -> dict[str, bytes]:
    """Files of an image (those it has), read from a container created but never started."""
    from docker.errors import NotFound

    container = client.api.create_container(image, command=["true"], labels=IMAGE_LABELS)["Id"]
    try:
        found = {}
        for path in paths:
            try:
                chunks, _ = client.api.get_archive(container, path)
            except NotFound:
                continue
            with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                handle = tar.extractfile(member) if member is not None else None
                if handle is not None:
                    found[path] = handle.read()
        return found
    finally:
        client.api.remove_container(container, force=True)


def has_id(table: bytes, number: int) -> bool:
    """Whether an /etc/passwd or /etc/group text has an entry with that uid or gid."""
    for line in table.decode("utf-8", "replace").splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[2].strip() == str(number):
            return True
    return False


def with_agent_user(client: Any, image: str, uid: int, gid: int, home: str) -> str:
    """``image``, or the thin image made from it that has a passwd and group entry for the
    agent's ``uid``/``gid`` (blocking: run it in a thread). Root always has one."""
    if uid == 0:
        return image
    files = image_files(client, image, ("/etc/passwd", "/etc/group"))
    passwd, group = files.get("/etc/passwd", b""), files.get("/etc/group", b"")
    if has_id(passwd, uid) and has_id(group, gid):
        return image
    image_id = client.api.inspect_image(image)["Id"]
    if not has_id(passwd, uid):
        passwd = _line_added(passwd, f"agent:x:{uid}:{gid}:agentmeter agent:{home}:/bin/sh")
    if not has_id(group, gid):
        group = _line_added(group, f"agent:x:{gid}:")
    digest = hashlib.sha256(image_id.encode() + b"\0" + passwd + b"\0" + group).hexdigest()[:16]
    tag = f"{USER_REPOSITORY}:{digest}"
    from docker.errors import ImageNotFound

    try:
        client.images.get(tag)
        return tag
    except ImageNotFound:
        pass
    context = io.BytesIO()
    tar = TarWriter(context)
    tar.data("Dockerfile", f"FROM {image_id}\nCOPY passwd group /etc/\n".encode())
    tar.data("passwd", passwd, 0o644)
    tar.data("group", group, 0o644)
    tar.close()
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                        labels=IMAGE_LABELS)
    return tag


def _line_added(table: bytes, line: str) -> bytes:
    text = table.decode("utf-8", "replace")
    return (text + ("" if not text or text.endswith("\n") else "\n") + line + "\n").encode()
