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


def test_folders_the_destination_has_get_no_entry_of_their_own(tmp_path):
    """A Harbor seed goes into the image's WORKDIR inside an archive for /: the WORKDIR and its
    parents must not be entries (extracting them would change the image's owner and mode)."""
    from agentmeter_tui.core.sandboxes.archive import TarWriter

    seed = tmp_path / "seed"
    (seed / "sub").mkdir(parents=True)
    (seed / "sub" / "data.csv").write_text("a,b\n")
    tar = TarWriter(uid=1000)
    tar.present("/srv/app")
    tar.tree("srv/app", seed)
    tar.folder("root", 0o700)
    with tarfile.open(fileobj=io.BytesIO(tar.getvalue())) as archive:
        entries = {m.name: (m.type, m.uid, m.mode) for m in archive.getmembers()}
    assert entries == {"srv/app/sub": (tarfile.DIRTYPE, 1000, (seed / "sub").stat().st_mode & 0o777),
                       "srv/app/sub/data.csv": (tarfile.REGTYPE, 1000, (seed / "sub" / "data.csv").stat().st_mode & 0o7777),
                       "root": (tarfile.DIRTYPE, 1000, 0o700)}
