"""Task folders are untrusted input: what a task brings into a sandbox stays inside it.

A task folder comes from a suite author or a downloaded dataset. Its workspace seed, tests and
image context are copied into every trial's sandbox, its instruction goes to the model and to
the screen, and its tests are read into memory. So before anything is used, the whole folder
is checked once:

- a symlink whose target lies outside the task folder (``/etc/shadow``, ``~/.ssh``, ``../..``)
  is refused, naming the link and its target: a copy would carry the host file into the
  sandbox (the verifier reads ``tests/`` through links) or show it to the model;
- a file over :data:`MAX_FILE_BYTES`, or a ``tests/`` folder over :data:`MAX_TESTS_BYTES` (read
  whole into memory and written into every sandbox), is refused with its size.

Links inside the folder are fine (copies keep them as links). Tar members that would escape
their folder are handled where archives are unpacked (``sandboxes/archive.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from .tomlerrors import InputError

MAX_FILE_BYTES = 1 << 30  # 1 GiB
MAX_TESTS_BYTES = 64 << 20  # 64 MiB


def check_task_files(folder: Path) -> None:
    """Raise :class:`InputError` for a link out of ``folder`` or an oversized file in it."""
    root = folder.resolve()
    tests = root / "tests"
    tests_total = 0
    for dirpath, dirnames, filenames in os.walk(folder):  # never descends into linked folders
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            if path.is_symlink():
                target = os.readlink(path)
                resolved = (path.parent / target).resolve()
                if not resolved.is_relative_to(root):
                    raise InputError(path, None, None, f"a symlink to '{target}', outside the task folder: "
                                                       "tasks may link only to their own files")
                continue
            if name in dirnames:
                continue
            size = path.lstat().st_size
            if size > MAX_FILE_BYTES:
                raise InputError(path, None, None, f"{size / (1 << 30):.1f} GiB: files over "
                                                   f"{MAX_FILE_BYTES >> 30} GiB are refused in a task folder")
            if path.resolve().is_relative_to(tests):
                tests_total += size
    if tests_total > MAX_TESTS_BYTES:
        raise InputError(tests, None, None, f"{tests_total / (1 << 20):.0f} MiB of tests: a task's tests/ "
                                            f"may hold {MAX_TESTS_BYTES >> 20} MiB (they are copied into "
                                            "every sandbox)")
