"""Run a batch of differential test cases in one process: the batch runner a sandbox executes.

This file is both a module (the runner's own snapshot and file placement come from here, so a
side effect means the same thing wherever a case runs) and a script copied into a sandbox and
run there with that sandbox's ``python3 -I -S``: it imports the standard library only.

    python3 -I -S batchrun.py SPEC.json     # prints one JSON document: a result per case, CPU time

The spec: ``{"run": [argv prefix], "root": folder for the case folders, "tool": the installed
tool's folder, "env": {...}, "timeout": seconds per case, "limit": bytes of stdout/stderr kept,
"cases": [{"id", "argv", "stdin", "files": [{"path", "text", "age_days", "executable"}]}]}``.
Each case runs as :class:`..executor.LocalExecutor` runs one: a fresh workspace, HOME and
TMPDIR, the files placed, a snapshot, the tool in its own session (the group killed at the
timeout), a second snapshot, the folder removed. A result: ``{"id", "exit_code" (null: timed
out), "stdout", "stderr", "duration", "before", "after"}`` with the two snapshots, from which
the caller derives the side effects exactly as it does for a local run. ``cpu`` is the CPU
seconds the cases' processes used (for benchmarks: wall times on a shared machine vary).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import time

DIR = "<dir>"


def is_hidden(relpath: str) -> bool:
    return any(part.startswith(".") for part in relpath.replace(os.sep, "/").split("/") if part)


_KINDS = ((stat.S_ISFIFO, "<fifo>"), (stat.S_ISSOCK, "<socket>"), (stat.S_ISCHR, "<device>"),
          (stat.S_ISBLK, "<device>"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "<special>")


def _file_digest(path: str) -> str:
    """A regular file's sha256; another kind of file is named, never opened for reading (a
    FIFO's open would wait for a writer that never comes, and the verifier with it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb", closefd=True) as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped in since it was listed
            return _kind(mode)
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _fingerprint(entry: os.DirEntry) -> str:
    try:
        if entry.is_symlink():
            return f"<link>{os.readlink(entry.path)}"
        if entry.is_dir(follow_symlinks=False):
            return DIR
        mode = entry.stat(follow_symlinks=False).st_mode
        return _file_digest(entry.path) if stat.S_ISREG(mode) else _kind(mode)
    except OSError as exc:  # a file we may not read: fingerprint the failure
        return f"<unreadable:{exc.errno}>"


def snapshot(root) -> dict:
    """Relative POSIX path -> fingerprint for everything visible under ``root`` (hidden entries
    left out, so a tool's big cache is never even read; links not followed). A stack, not
    os.walk's recursion: a tool that nests a thousand folders gets its side effects judged,
    not a RecursionError out of the verifier. A folder that cannot be listed (past PATH_MAX)
    is fingerprinted by its error."""
    entries: dict = {}
    root_str = str(root)
    pending = [""]
    while pending:
        rel_folder = pending.pop()
        try:
            with os.scandir(os.path.join(root_str, rel_folder)) as scan:
                listed = sorted((e for e in scan if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError as exc:
            if rel_folder:  # (no root: no entries, as ever)
                entries[rel_folder] = f"<unreadable:{exc.errno}>"
            continue
        for entry in listed:
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            entries[rel] = _fingerprint(entry)
            if entries[rel] == DIR:
                pending.append(rel)
    return entries


def remove(path: str) -> None:
    """Remove a case's folder in the sandbox, however deep its tool nested folders in it:
    ``shutil.rmtree`` recurses once per level and its RecursionError is not an OSError that
    ``ignore_errors`` holds; there ``rm -rf`` (coreutils' and busybox's walk any depth) finishes
    the job. (The runner's side has ``hostfs.remove_tree``; this script imports the standard
    library only.)"""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)


def place_files(root, files: list, now: float | None = None) -> None:
    """Write ``files`` (dicts: path, text, age_days, executable) under ``root``; a path that
    leaves ``root`` is refused."""
    now = time.time() if now is None else now
    resolved_root = os.path.realpath(str(root))
    for spec in files:
        target = os.path.realpath(os.path.join(resolved_root, spec["path"]))
        if not target.startswith(resolved_root + os.sep):
            raise ValueError(f"case file path '{spec['path']}' leaves the workspace")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(spec.get("text") or "")
        if spec.get("executable"):
            os.chmod(target, 0o755)
        if spec.get("age_days") is not None:
            stamp = now - spec["age_days"] * 86400
            os.utime(target, (stamp, stamp))


def _pump(proc: subprocess.Popen, selector: selectors.BaseSelector, kept: dict, pending: memoryview,
          deadline: float, limit: int) -> bool:
    """Feed the tool its input and keep its output (each stream cut at ``limit``) until both
    streams close or the deadline passes (True: timed out)."""
    while selector.get_map():
        left = deadline - time.perf_counter()
        if left <= 0:
            return True
        for key, _ in selector.select(left):
            if key.fileobj is proc.stdin:
                try:
                    pending = pending[os.write(proc.stdin.fileno(), pending[:1 << 16]):]
                except (BrokenPipeError, ConnectionResetError):
                    pending = pending[:0]  # the tool did not read its input: that is its business
                if not pending:
                    selector.unregister(proc.stdin)
                    proc.stdin.close()
                continue
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            buffer = kept[key.fd]
            if len(buffer) < limit:
                buffer += chunk[: limit - len(buffer)]
    return False


def _reap(proc: subprocess.Popen, deadline: float, timed_out: bool) -> bool:
    """The tool waited for until the deadline, its whole group killed past it (True: timed out)."""
    if not timed_out:
        try:
            proc.wait(max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return timed_out


def run_process(argv: list, cwd: str, env: dict, stdin, timeout: float, limit: int):
    """(exit code or None on timeout, stdout, stderr, seconds): the tool in its own session,
    output cut at ``limit`` bytes, the whole group killed at the timeout."""
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (FileNotFoundError, PermissionError) as exc:
        return 127, b"", f"{exc}\n".encode(), time.perf_counter() - started
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # all three PIPE
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    pending = memoryview(stdin or b"")
    selector = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        selector.register(stream, selectors.EVENT_READ)
    if pending:
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = started + timeout
    timed_out = _pump(proc, selector, kept, pending, deadline, limit)
    timed_out = _reap(proc, deadline, timed_out)
    elapsed = time.perf_counter() - started
    selector.close()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if not stream.closed:
            stream.close()
    if timed_out:
        return None, b"", b"timed out\n", elapsed
    return proc.returncode, bytes(kept[out_fd]), bytes(kept[err_fd]), elapsed


def neutral(data: bytes, work: str, tool: str) -> str:
    """Decode, and name the per-case folders by role: their absolute paths differ between sides."""
    return data.decode("utf-8", "replace").replace(work, "$WORKSPACE").replace(tool, "$TOOL")


def run_case(spec: dict, case: dict, base: str) -> dict:
    work, home, tmp = (os.path.join(base, name) for name in ("work", "home", "tmp"))
    for folder in (work, home, tmp):
        os.makedirs(folder)
    try:
        place_files(work, case.get("files") or [])
        before = snapshot(work)
        env = {**spec["env"], "HOME": home, "TMPDIR": tmp}
        stdin = case["stdin"].encode() if case.get("stdin") is not None else None
        code, out, err, took = run_process([*spec["run"], *case["argv"]], work, env, stdin, spec["timeout"],
                                           spec["limit"])
        after = snapshot(work)
    finally:
        remove(base)
    return {"id": case["id"], "exit_code": code, "stdout": neutral(out, work, spec["tool"]),
            "stderr": neutral(err, work, spec["tool"]), "duration": took, "before": before, "after": after}


def main(argv: list) -> int:
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    results = [run_case(spec, case, os.path.join(spec["root"], str(number)))
               for number, case in enumerate(spec["cases"])]
    remove(spec["root"])  # the spec too: the volume holds only live batches
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.stdout.write(json.dumps({"cases": results, "cpu": usage.ru_utime + usage.ru_stime}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
