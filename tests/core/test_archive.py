"""Archives copied out of a sandbox: what points outside the destination is skipped, and the
files beside it still arrive (a Codex HOME holds an absolute symlink of its own,
``.codex/tmp/arg0-linux/codex-arg0*/apply_patch``, next to the rollout files that carry usage)."""

from __future__ import annotations

import io
import tarfile

from agentmeter_tui.core.sandboxes.archive import extract


def _tar(entries: list[tuple[str, bytes, str | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, link in entries:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_links_out_are_skipped_and_the_rest_extracted(tmp_path):
    rollout = b'{"type":"event_msg","payload":{"type":"token_count"}}\n'
    data = _tar([
        ("home/.codex/tmp/arg0-linux/codex-arg08Pkgcw/apply_patch", b"", "/opt/agentmeter/clis/codex"),
        ("home/.codex/escape", b"", "../../../../etc/passwd"),
        ("home/.codex/sessions/2026/11/26/rollout-x.jsonl", rollout, None),
        ("../outside.txt", b"no", None),
    ])
    extract(data, tmp_path / "out")
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_dir())
    assert files == ["out/home/.codex/sessions/2026/11/26/rollout-x.jsonl"]
    assert (tmp_path / "out/home/.codex/sessions/2026/11/26/rollout-x.jsonl").read_bytes() == rollout
