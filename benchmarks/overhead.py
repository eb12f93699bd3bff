"""Harness overhead per trivial trial: a real agent process that prints a short stream, run at
concurrency 8 through the whole engine (fresh sandbox, launch, parse, store writes, verifier,
cleanup), divided by the number of trials.

    python benchmarks/overhead.py [--trials 400] [--concurrency 8] [--isolation none] [--private]

Peer (research/peer-baselines.md, same machine kind): Inspect AI 14.3 ms/sample headless.
Target (issue 28): the overhead within 5x the floor, the spawn and wait of ``/bin/true`` at the
same concurrency measured right after, on the same machine (a machine's speed moves both).
On a shared machine take before/after pairs one after another and say the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.store import Store
from benchmarks.loadsuite import run_headless, write_suite

TARGET_RATIO = 5  # issue 28: the per-trial overhead within 5x the spawn floor
STREAM = ('{"type":"init","model":"m"}\n{"type":"assistant","text":"hello"}\n'
          '{"type":"usage","usage":{"prompt_tokens":12,"completion_tokens":3}}\n{"type":"result","status":"success"}\n')
async def spawn_floor(n: int, concurrency: int) -> float:
    """asyncio create_subprocess_exec of /bin/true + wait, at the same concurrency."""
    slots = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with slots:
            proc = await asyncio.create_subprocess_exec("/bin/true")
            await proc.wait()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return (time.perf_counter() - started) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--verifier", choices=("none", "command"), default="none",
                        help="none: harness only; command: plus a `true` verifier process per trial")
    parser.add_argument("--isolation", choices=("namespaces", "none"), default="namespaces",
                        help='none: the local sandbox without bwrap (isolation = "none"): the harness alone, '
                             "for before/after pairs of trees whose walls differ")
    parser.add_argument("--private", action="store_true",
                        help="the suite in a 0700 folder, which trials' uids cannot pass: a root runner's "
                             "walls then take the uid drop's exec (sandboxes/userns.py)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="overhead-"))
    if not args.private:  # a suite others may pass, as in a checkout under /srv or a 0755 home
        folder.chmod(0o711)
    try:
        verifier = '[verifier]\nkind = "none"\n' if args.verifier == "none" else '[verifier]\ncommand = "true"\n'
        suite = write_suite(folder, "overhead", trials=args.trials, concurrency=args.concurrency,
                            args=["/bin/cat", "{suite}/stream.jsonl"], verifier=verifier)
        (suite / "stream.jsonl").write_text(STREAM)
        if args.isolation == "none":
            with open(suite / "suite.toml", "a") as toml:
                toml.write('[sandbox]\nkind = "local"\nisolation = "none"\n')
        db = folder / "o.db"
        run_headless(suite, db)
        store = Store(db)
        first, last = store.db.execute("select min(started_at), max(finished_at) from trials").fetchone()
        span = (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
        statuses = {r[0] for r in store.db.execute("select distinct status from trials")}
        assert statuses == ({"failed"} if args.verifier == "none" else {"passed"}), statuses
        events = store.db.execute("select count(*) from events").fetchone()[0]
        floor = asyncio.run(spawn_floor(args.trials, args.concurrency))
        per_trial = span / args.trials * 1000
        print(f"{args.trials} trivial trials at concurrency {args.concurrency}, verifier {args.verifier}: "
              f"{span:.2f} s "
              f"({events} events stored)")
        print(f"harness overhead: {per_trial:.2f} ms per trial (Inspect AI 14.3 ms/sample)")
        print(f"floor, spawn + wait of /bin/true at the same concurrency: {floor:.2f} ms")
        print(f"ratio: {per_trial / floor:.1f}x the floor (target <= {TARGET_RATIO:g}x the floor); "
              f"load average {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
