"""Harbor's verifier: ``bash /tests/test.sh`` in the trial's container, judged by the reward
file it writes, never by its exit code.

After the agent stops, whatever it left running in the container is killed
(``SandboxSession.end_agent``: a leftover job cannot write the reward while the tests run),
``/tests``, ``/logs/verifier`` and ``/logs/agent/trajectory.json`` are removed (the agent
cannot plant a reward, a test helper or a transcript for a judge), the transcript goes to
``/logs/agent/trajectory.json`` (ATIF, for LLM-judge verifiers), the task's ``tests/`` is
uploaded to ``/tests`` (all three in one exec, ``SETUP``), and ``bash /tests/test.sh`` runs from the image's working folder with the image's environment, as root,
under ``[verifier] timeout_sec``. The reward is ``/logs/verifier/reward.txt`` (one number) or
``reward.json`` (``{"reward": x}`` or several named rewards, all kept in the trial record).
Quality R is the ``reward`` key, else the only key, else the mean of the named rewards,
clamped to [0, 1]; the trial passes when that reward reaches the suite's ``pass_threshold``
(default 1.0). No reward file, a bad one, or a timeout: ``failed``, with the reason.
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from ..verifiers.base import Verifier, VerifierResult
from ..verifiers.command import MAX_OUTPUT

if TYPE_CHECKING:
    from ..sandboxes.base import SandboxSession

TESTS, LOGS = "/tests", "/logs"
RESET_FAILED = 199  # the exit code of the verifier's exec when /tests could not be set up
# One exec, as root, from the WORKDIR: whatever the agent left in /tests and /logs/verifier is
# removed, the staged tests (and transcript) move in, then test.sh runs. Staging in our scratch
# folder and one exec instead of three cuts the engine round trips of a verdict from five to three.
SETUP = (f"rm -rf {TESTS} {LOGS}/verifier {LOGS}/agent/trajectory.json && mkdir -p {LOGS}/verifier {LOGS}/agent && mv \"$1/tests\" {TESTS} && "
         f"{{ [ ! -f \"$1/trajectory.json\" ] || mv -f \"$1/trajectory.json\" {LOGS}/agent/trajectory.json; }} "
         f"|| {{ echo 'agentmeter: could not set up {TESTS} and {LOGS}' >&2; exit {RESET_FAILED}; }}; "
         f"exec bash {TESTS}/test.sh")


class HarborSettings(BaseModel):
    """``[verifier]`` of a Harbor task: Harbor's keys we use, the others kept."""

    model_config = ConfigDict(extra="allow")
    kind: str = "harbor"
    timeout_sec: float = Field(600, gt=0)


class RewardError(ValueError):
    pass


def read_rewards(found: dict[str, bytes]) -> tuple[dict[str, float], str]:
    """The named rewards from reward.txt (as ``reward``) and/or reward.json, and which file(s)."""
    rewards: dict[str, float] = {}
    if "reward.json" in found:
        try:
            data = orjson.loads(found["reward.json"])
        except orjson.JSONDecodeError as exc:
            raise RewardError(f"reward.json is not JSON ({exc})") from None
        if not isinstance(data, dict) or not data:
            raise RewardError("reward.json must be an object of named rewards, e.g. {\"reward\": 1}")
        for name, value in data.items():
            rewards[str(name)] = _number(value, f"reward.json \"{name}\"")
    if "reward.txt" in found:
        rewards["reward"] = _number(found["reward.txt"].decode("utf-8", "replace").strip(), "reward.txt")
    return rewards, " + ".join(sorted(found))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise RewardError(f"{where}: {value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RewardError(f"{where}: {str(value)[:80]!r} is not a number") from None
    if not math.isfinite(number):
        raise RewardError(f"{where}: {number} is not a finite number")
    return number


def headline(rewards: dict[str, float]) -> float:
    """The reward that becomes quality and decides the pass (module docstring)."""
    if "reward" in rewards:
        return rewards["reward"]
    return sum(rewards.values()) / len(rewards)


class HarborVerifier(Verifier):
    kind = "harbor"
    Settings = HarborSettings

    async def verify(self, session: SandboxSession) -> VerifierResult:
        if not getattr(session, "harbor", False):
            from ..sandboxes import harbor_kinds, kind_choice

            return VerifierResult(False, 0.0, infra_error=f"task '{self.task.id}' follows Harbor's contract, "
                                  f"which needs a container sandbox: {kind_choice(harbor_kinds())}")
        timeout = self.task.verifier.timeout_sec
        tests = self.task.tests_dir
        if tests is None or not (tests / "test.sh").is_file():
            return self._failed(f"{self.task.path.name}/tests/test.sh is missing", "", None)
        await session.end_agent()
        stage = f"harbor-{secrets.token_hex(6)}"  # a fresh name: nothing the agent left can be in it
        files = {f"{stage}/tests/{p.relative_to(tests)}": p.read_bytes() for p in sorted(tests.rglob("*"))
                 if p.is_file()}
        if self.trajectory is not None:
            files[f"{stage}/trajectory.json"] = self.trajectory
        await session.write_files("scratch", files)
        result = await session.exec(["sh", "-c", SETUP, "harbor", f"{session.scratch}/{stage}"], timeout=timeout)
        output = (result.stdout + result.stderr)[-MAX_OUTPUT:].decode("utf-8", "replace")
        if result.exit_code == RESET_FAILED and b"agentmeter: could not set up" in result.stderr:
            return VerifierResult(False, 0.0, output, infra_error=f"could not set up {TESTS} and {LOGS}: "
                                  + output[-500:])
        found = await session.fetch_files(f"{LOGS}/verifier", ["reward.txt", "reward.json"])
        details: dict[str, Any] = {"contract": "harbor", "threshold": self.pass_threshold,
                                   "test_exit_code": result.exit_code}
        if result.timed_out:
            return self._failed(f"tests/test.sh ran past [verifier] timeout_sec = {timeout:g} s and was killed",
                                output, result.exit_code, details)
        if not found:
            return self._failed("tests/test.sh wrote no /logs/verifier/reward.txt or reward.json "
                                f"(exit code {result.exit_code})", output, result.exit_code, details)
        try:
            rewards, source = read_rewards(found)
        except RewardError as exc:
            return self._failed(str(exc), output, result.exit_code, details)
        reward = headline(rewards)
        details.update(rewards=rewards, reward_file=source, reward=reward)
        output += f"\n[{source}: " + ", ".join(f"{name} = {value:g}" for name, value in rewards.items()) + "]"
        quality = min(1.0, max(0.0, reward))
        if quality != reward:
            output += f"\n[reward {reward:g} is outside [0, 1]: quality {quality:g}]"
        passed = reward >= self.pass_threshold - 1e-9
        reason = None if passed else f"reward {reward:g} < threshold {self.pass_threshold:g}"
        return VerifierResult(passed, quality, output, result.exit_code, details, reason=reason)

    def _failed(self, reason: str, output: str, exit_code: int | None,
                details: dict[str, Any] | None = None) -> VerifierResult:
        return VerifierResult(False, 0.0, f"{output}\n[{reason}]".lstrip(), exit_code, details or {}, reason=reason)


async def trajectory_of(trial: Any) -> bytes | None:
    """The trial's transcript so far as ATIF JSON (``core/interop/atif.py``), or None with a
    note in the transcript when the export fails (the verifier still runs)."""
    from ..interop.atif import trajectory_from_events

    def read(store: Any) -> tuple[list, Any]:  # on the writer's thread, after its pending events
        return list(store.events(trial.id)), store.usage_by_seq(trial.id)

    try:
        events, usage_rows = await trial.ctx.call(read)
        trajectory = trajectory_from_events(
            events, session_id=f"trial-{trial.id}-{trial.token}", agent_name=trial.adapter.name,
            agent_version=trial.adapter.version, usage=trial.usage, usage_rows=usage_rows,
            model_name=trial.plan.config.model.id if trial.adapter.needs_model else None,
            cost_usd=None if trial.cost is None else float(trial.cost))
        return trajectory.to_json()
    except Exception as exc:  # noqa: BLE001 - judges that need the transcript will say it is missing
        trial.note(f"no /logs/agent/trajectory.json: the ATIF export failed: {exc!r}")
        return None
