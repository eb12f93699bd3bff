"""Headless progress: a line per finished trial and a live summary, printed with rich on a
terminal and as plain lines into a pipe or a file."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from ..core.inert import inert
from ..core.paths import runner_log_path
from ..core.run.control import ControlClient, ControlError, Meter, Progress
from .capheld import EXIT_HELD, held_by_cap, held_lines

EXIT_NOT_STARTED = 6  # the runner's own exit code when a run cannot start (core/run/runner.py)
EXIT_INFRA = 8  # the run finished with cells whose last attempt ended infra-invalid (no result)
STATUS_STYLE = {"passed": "green", "failed": "yellow", "killed": "magenta", "errored": "red",
                "infra-invalid": "red dim"}


def trial_line(meter: Meter) -> Text:
    tokens = meter.get("tokens") or {}
    raw = sum(tokens.values())
    cost = meter.get("cost_usd")
    usd = "unpriced" if cost is None else f"${cost:.4f}"
    status = meter.get("status", "?")
    line = Text()
    line.append(f"#{meter.get('id')} ", style="dim")
    line.append(f"{meter.get('task')} · {meter.get('model')} × {meter.get('cli')} · t{meter.get('trial')}  ")
    line.append(f"{status:<13}", style=STATUS_STYLE.get(status, ""))
    line.append(f" {raw:>9,} tok  {usd:>10}")
    if reason := meter.get("reason"):
        line.append(f"  {inert(reason)}", style="dim")  # a reason can quote agent output
    flags = [f for f in meter.get("flags") or [] if f != "unpriced"]
    if flags:
        line.append(f"  [{', '.join(flags)}]", style="bold")
    return line


def summary(progress: Progress, totals: dict) -> Text:
    text = Text()
    text.append(f"{progress.get('done', 0)}/{progress.get('total', 0)} done", style="bold")
    text.append(f" · {progress.get('running', 0)} running · {progress.get('queued', 0)} queued")
    text.append(f" · {totals['tokens']:,} tokens · ${totals['usd']:.4f}")
    if progress.get("paused"):
        text.append(" · PAUSED", style="bold yellow")
    for why in progress.get("held") or []:
        text.append(f" · HELD: {why}", style="bold red")
    return text


def last_run_status(db: Path) -> str | None:
    from .runsummary import last_run

    run = last_run(db)
    return run["status"] if run else None


class Printer:
    """Where the lines go. Into a pipe or a file they are written as plain text, unwrapped: a
    log keeps one trial per line, and rich's layout (about a millisecond a line) would take CPU
    from the runner on a small machine when trials finish by the hundred a second. On a
    terminal, rich with a live summary redrawn at most a few times a second."""

    def __init__(self) -> None:
        self.console = Console(highlight=False)
        self.terminal = self.console.is_terminal
        self.live: Live | None = None

    def line(self, text: Text | str) -> None:
        if self.terminal:
            self.console.print(text)
        else:
            sys.stdout.write((text.plain if isinstance(text, Text) else text) + "\n")
            sys.stdout.flush()

    def following(self, first: Text) -> Live | nullcontext:
        if not self.terminal:
            return nullcontext()
        self.live = Live(first, console=self.console, transient=True, refresh_per_second=4)
        return self.live

    def update(self, text: Text) -> None:
        if self.live is not None:
            self.live.update(text)  # drawn by the live's own refresh, not once per message


def follow_headless(db: Path) -> int:
    """Follow the runner until the run ends. Ctrl-C detaches: the runner goes on (it is paid
    work, and quitting a client never stops it); the message says how to follow or stop it."""
    try:
        return _follow(db)
    except KeyboardInterrupt:
        print(f"\nagentmeter: detached; the runner goes on with the run. Follow it: agentmeter attach --db {db}"
              f" · stop it (running trials end infra-invalid and run again later): agentmeter stop --db {db}",
              file=sys.stderr)
        return 130


RECONNECTS = 20  # a connection dropped under a live runner is followed again, this many times at most
DONE = ("finished", "stopped")


class Follower:
    """What one ``run --headless`` has printed, kept across connections: a connection that
    drops while the runner goes on (a client dropped as slow on a loaded machine, say) is
    followed again, and no trial is printed twice."""

    def __init__(self, printer: Printer) -> None:
        self.printer = printer
        self.totals = {"tokens": 0, "usd": 0.0}
        self.printed: set[int | None] = set()
        self.told: set[str] = set()  # preparation lines printed (a snapshot repeats those said before)
        self.progress: Progress = {}
        self.attached = False  # a snapshot came at least once
        self.suite = "SUITE"
        self.cells: dict[tuple, str | None] = {}  # (task, model, cli, trial) -> its last attempt's status (None: not said)

    def prepared(self, text: str | None) -> None:  # image builds and the like: a line each, as they go
        if text and text not in self.told:
            self.told.add(text)
            self.printer.line(Text(f"preparing: {inert(text)}", style="dim"))

    def finished(self, meter: Meter) -> None:
        if meter.get("id") in self.printed:
            return
        self.printed.add(meter.get("id"))
        self.cells[(meter.get("task"), meter.get("model"), meter.get("cli"), meter.get("trial"))] = meter.get("status")
        self.totals["tokens"] += sum((meter.get("tokens") or {}).values())
        self.totals["usd"] += meter.get("cost_usd") or 0.0
        self.printer.line(trial_line(meter))

    def follow(self, client: ControlClient) -> tuple[str, str | None]:
        """Follow one connection: ("finished" or the run's status, its error), or ("lost", None)
        when the connection ended before the runner said the run was over."""
        feed = client.subscribe(events=False)  # a refusal raises ControlError here, at its first line
        snapshot = next(feed, None)
        # None: the runner ended (or dropped us) between the connection and the snapshot, which
        # is always its first message (feed.py)
        if snapshot is None or snapshot["type"] != "snapshot":
            return "lost", None
        self.attached = True
        self.suite = snapshot.get("suite") or self.suite
        self.progress = snapshot.get("progress", {})
        for text in [*snapshot.get("prepared", ()), self.progress.get("preparing")]:
            self.prepared(text)  # what the runner prepared before this connection, then now
        for meter in snapshot.get("done", ()):  # finished before this printer attached
            self.finished(meter)
        if why := held_by_cap(self.progress):  # attached to a runner held already: no message may come
            return "held", why
        with self.printer.following(summary(self.progress, self.totals)):
            try:
                for message in feed:
                    if message["type"] == "preparing":
                        self.prepared(message.get("text"))
                    else:
                        self.progress = message.get("progress", self.progress)
                        self.prepared(self.progress.get("preparing"))
                    if message["type"] == "tick":
                        for meter in message.get("finished", ()):
                            self.finished(meter)
                    self.printer.update(summary(self.progress, self.totals))
                    if message["type"] == "finished":
                        return message.get("status", "finished"), message.get("error")
                    if why := held_by_cap(self.progress):
                        return "held", why
            except (ControlError, ConnectionError):
                pass
        return "lost", None


def _follow(db: Path) -> int:
    follower = Follower(Printer())
    status, error = "lost", None
    for attempt in range(1 + RECONNECTS):
        if attempt:
            time.sleep(min(0.05 * attempt, 1.0))  # a runner that drops us again and again is not hammered
        try:
            client = ControlClient(db)
        except ControlError:
            if attempt == 0 and (why := _not_started(db)):
                print(why, file=sys.stderr)  # it failed at once, before we could follow it
                return EXIT_NOT_STARTED
            if attempt == 0 and last_run_status(db) not in DONE:
                raise  # no runner to follow (it says which store)
            break  # the runner is gone: what the store says decides below
        with client:
            status, error = follower.follow(client)
        if status == "held":
            follower.printer.line(summary(follower.progress, follower.totals))
            for line in held_lines(follower.progress, error or "", follower.suite, str(db)):
                print(f"agentmeter: {inert(line)}", file=sys.stderr)
            return EXIT_HELD
        if status != "lost" or last_run_status(db) in DONE:
            break
    if status == "failed":  # as the runner itself exits: 6, the run could not start
        print(f"agentmeter: {error or 'the run could not start; see the runner log'}", file=sys.stderr)
        return EXIT_NOT_STARTED
    if status == "lost" and last_run_status(db) in DONE:
        status = "finished"
    if not follower.attached:
        if status == "finished":  # a suite with nothing left to run ends at once
            follower.printer.line("the run has finished; nothing left to follow")
            from .runsummary import last_run

            if (run := last_run(db)) is not None:  # it ended before we could follow: its table all the same
                follower.suite = run["suite_id"]
                _end_table(follower, db)
            return 0
        raise ControlError(f"the runner ended without finishing the run; its log: {runner_log_path(db)}")
    follower.printer.line(summary(follower.progress, follower.totals))
    if status == "lost":
        follower.printer.line(Text("the runner ended without finishing the run (agentmeter status says what"
                                   f" the store holds); the last lines of its log, {runner_log_path(db)}:",
                                   style="red"))
        for line in log_tail(db):
            follower.printer.line(Text(f"  {inert(line)}", style="dim"))
        return 1
    if status == "finished":
        _end_table(follower, db)
    return _infra_exit(follower, status)


def _end_table(follower: Follower, db: Path) -> None:
    """The per-configuration table and the command that opens the report (endsummary.py)."""
    from .endsummary import summary_lines

    try:
        lines = summary_lines(db, follower.suite)
    except Exception as exc:  # noqa: BLE001 - a summary that cannot be read never changes the exit code
        lines = [f"(no summary table: {exc})"]
    if not lines:
        return
    for line in lines:
        follower.printer.line(Text(line))  # Text: a model name in brackets is not rich markup
    follower.printer.line(Text(f"open the report: agentmeter report --db {db}  (or the TUI: agentmeter review --db {db})"))


def _infra_exit(follower: Follower, status: str) -> int:
    """EXIT_INFRA when a finished run left cells without a result (their last attempt ended
    infra-invalid after its retries): the grid is not complete, and a script must know."""
    lost = sum(1 for s in follower.cells.values() if s == "infra-invalid")
    if status != "finished" or not lost:
        return 0
    print(f"agentmeter: {lost} cell(s) ended infra-invalid: no result (each trial's reason is above); "
          "`agentmeter rerun --status infra-invalid` runs them again", file=sys.stderr)
    return EXIT_INFRA


def _not_started(db: Path) -> str | None:
    """The runner's last word when it could not start the run (a check that fails at once
    ends it before a client can follow)."""
    last = log_tail(db, 1)
    found = last[0].partition("] ")[2] if last else ""
    return inert(found) if found.startswith("agentmeter: cannot start the run") else None


def log_tail(db: Path, lines: int = 10) -> list[str]:
    try:
        return runner_log_path(db).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []
