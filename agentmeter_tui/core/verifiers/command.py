"""The ``command`` verifier: run the task's tests in the sandbox after the agent stops.

Exit 0 is a pass. The tests may write a reward in [0, 1] to ``$AGENTMETER_REWARD_FILE``
(a number, or JSON ``{"reward": x}``) to give a quality R finer than pass/fail; without one,
R is 1.0 for a pass and 0.0 otherwise. The tests are copied in only now, so the agent never
sees them.

A verdict comes only from the verifier: once the agent has stopped, whatever it left running
is ended (``SandboxSession.end_agent``), and the tests and the reward file live in a folder
whose name is drawn only then (``verdict-<random>`` in the scratch folder). A reward the agent
planted anywhere, a test helper it slipped into a tests folder, a link it laid where the
reward would go: none is in that folder, and nothing of the agent's runs to write there.
"""

from __future__ import annotations

import math
import secrets
import shlex
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field

from .base import Verifier, VerifierResult

MAX_OUTPUT = 64 * 1024


def _tests_files(tests_dir: Path | None) -> dict[str, bytes]:
    if tests_dir is None:
        return {}
    return {str(p.relative_to(tests_dir.parent)): p.read_bytes() for p in sorted(tests_dir.rglob("*")) if p.is_file()}


def parse_reward(data: bytes) -> float:
    text = data.decode("utf-8", "replace").strip()
    value = orjson.loads(text)["reward"] if text.startswith("{") else float(text)
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"reward {value!r} is not a number in [0, 1]")
    return value


class CommandSettings(BaseModel):
    """The ``[verifier]`` keys of a command verifier; anything else is a typo, and an error."""

    model_config = ConfigDict(extra="forbid")
    kind: str = "command"
    command: str | None = None
    timeout_sec: float = Field(600, gt=0)


class CommandVerifier(Verifier):
    kind = "command"
    Settings = CommandSettings

    async def verify(self, session) -> VerifierResult:
        spec = self.task.verifier
        files = _tests_files(self.task.tests_dir)
        command = spec.command or ("sh {tests}/test.sh" if "tests/test.sh" in files else None)
        if command is None:
            return VerifierResult(False, 0.0, infra_error=f"task '{self.task.id}' has no verifier command "
                                  "and no tests/test.sh")
        await session.end_agent()
        stage = f"verdict-{secrets.token_hex(8)}"  # drawn after the agent stopped: it cannot have been there
        await session.write_files("scratch", {f"{stage}/{rel}": data for rel, data in files.items()})
        folder = f"{session.scratch}/{stage}"
        tests = f"{folder}/tests"
        # The folder exists already when the task has tests; `mkdir -p` makes it for a bare command.
        script = f"mkdir -p {shlex.quote(folder)} && " + command.replace("{tests}", shlex.quote(tests))
        argv = ["/bin/sh", "-c", script]
        env = {"AGENTMETER_WORKSPACE": session.workspace, "AGENTMETER_TESTS": tests,
               "AGENTMETER_REWARD_FILE": f"{folder}/reward.txt"}
        result = await session.exec(argv, env=env, timeout=spec.timeout_sec)
        output = (result.stdout + result.stderr)[-MAX_OUTPUT:].decode("utf-8", "replace")
        if result.timed_out:
            output += f"\n[verifier timed out after {spec.timeout_sec:g} s]"
        passed = result.exit_code == 0 and not result.timed_out
        quality = 1.0 if passed else 0.0
        found = await session.fetch_files("scratch", [f"{stage}/reward.txt"])
        if f"{stage}/reward.txt" in found:
            try:
                quality = parse_reward(found[f"{stage}/reward.txt"])
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
                output += f"\n[reward file ignored: {exc}]"
        return VerifierResult(passed, quality, output, result.exit_code)


class NoVerifier(Verifier):
    """For tasks judged only by hand: the trial ends ``failed`` with quality 0 unless scored."""

    kind = "none"
    Settings = CommandSettings

    async def verify(self, session) -> VerifierResult:
        return VerifierResult(False, 0.0, "no automatic verifier: judge this trial by hand")
