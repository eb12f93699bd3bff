"""Acceptance for the differential verifier: deliberately broken candidates against the real
``sweep`` oracle of suites/cli-tools, each failing exactly the funnel stage it should."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from agentmeter_tui.core.difftest import evaluate
from agentmeter_tui.core.difftest.cases import Case, CaseFile, CommandClass, FileSpec
from agentmeter_tui.core.difftest.evaluate import CommandJudge, OracleError
from agentmeter_tui.core.difftest.executor import LocalExecutor, ToolCommand
from agentmeter_tui.core.difftest.oracle import clear_oracle_cache

ORACLE = Path(__file__).resolve().parents[2] / "suites" / "cli-tools" / "file-sweeper" / "tests" / "oracle"
COMMAND = ToolCommand(run="{python} -S {tool}/sweep.py", install="{python} -m py_compile sweep.py",
                      case_timeout=10)
ALL = ("exec", "side_effects", "exact", "fuzzy")

FIXTURE = [
    FileSpec(path="data/app.log", text="started\n", age_days=30.5),
    FileSpec(path="data/today.log", text="fresh\n", age_days=0.5),
    FileSpec(path="data/notes.txt", text="keep\n", age_days=10.5),
    FileSpec(path="data/sub/deep.log", text="nested\n", age_days=60.5),
]


def case(cid: str, *argv: str) -> Case:
    return Case(id=cid, argv=list(argv), fixture="logs")


CASES = CaseFile(fixtures={"logs": FIXTURE}, classes=[
    CommandClass(id="sweep", cases=[
        case("sweep#1", "data", "--older-than", "7"),
        case("sweep#2", "data", "--older-than", "100"),  # deletes nothing
        case("sweep#3", "missing", "--older-than", "1"),  # negative: exit 1
        case("sweep#4", "data", "--older-than", "x"),  # negative: exit 2
    ]),
    CommandClass(id="sweep --recursive", flags=["--recursive"], cases=[
        case("rec#1", "data", "--older-than", "7", "--recursive"),
        case("rec#2", "data", "--older-than", "40", "--recursive", "--ext", "log"),
    ]),
    CommandClass(id="sweep --dry-run", flags=["--dry-run"], cases=[
        case("dry#1", "data", "--older-than", "7", "--dry-run"),
        case("dry#2", "data", "--older-than", "0", "--dry-run", "--recursive"),
    ]),
])


def candidate(tmp_path: Path, *replacements: tuple[str, str], extra: str = "") -> Path:
    """The oracle's source with some edits: a deliberately broken tool."""
    source = (ORACLE / "sweep.py").read_text()
    for old, new in replacements:
        assert old in source, old
        source = source.replace(old, new)
    if extra:  # before the main guard, so that main sees it
        source = source.replace('\nif __name__ == "__main__":', extra + '\n\nif __name__ == "__main__":')
    folder = tmp_path / "candidate"
    folder.mkdir()
    (folder / "sweep.py").write_text(source)
    return folder


async def judge(folder: Path, **kwargs):
    kwargs.setdefault("use_cache", False)
    return await evaluate(CASES, ORACLE, folder, kwargs.pop("command", COMMAND), **kwargs)


def by_id(report):
    return {v.case_id: v for v in report.verdicts}


async def test_the_oracle_as_candidate_scores_one_everywhere():
    report = await judge(ORACLE)
    scores = report.scores
    assert scores["build"] == 1.0
    assert all(scores[m] == 1.0 for m in ALL), scores
    assert scores["reject"] == 1.0
    assert scores["semantic"] is None  # off by default
    assert [(c.positives, c.negatives) for c in report.classes] == [(2, 2), (2, 0), (2, 0)]
    assert report.as_dict()["runtime"]["cases"] == 8


async def test_a_candidate_that_does_not_install_scores_zero(tmp_path):
    report = await judge(candidate(tmp_path, extra="\ndef broken(:\n"))
    assert not report.built
    assert report.candidate_build.exit_code not in (0, None)
    assert all(value in (0.0, None) for value in report.scores.values())
    assert report.score == 0.0
    assert report.as_dict()["build"]["candidate"]["ok"] is False


async def test_exit_zero_without_side_effects_fails_sidefx_so_exact_and_fuzzy(tmp_path):
    # the seed's "deletor": says it deleted, exits 0, deletes nothing
    report = await judge(candidate(tmp_path, ("os.remove(path)", "pass")))
    cases = by_id(report)
    for cid in ("sweep#1", "rec#1", "rec#2"):  # the oracle deleted something in these
        verdict = cases[cid]
        assert verdict.exec and not verdict.side_effects and not verdict.exact and not verdict.fuzzy, cid
        assert verdict.candidate.stdout == verdict.oracle.stdout  # the stdout alone would have passed
        assert verdict.oracle.side_effects.deleted and not verdict.candidate.side_effects
    for cid in ("sweep#2", "dry#1", "dry#2"):  # nothing to delete: nothing to miss
        assert cases[cid].fuzzy, cid
    scores = report.scores
    assert scores["exec"] == 1.0
    assert scores["side_effects"] == pytest.approx((1 / 2 + 0 + 1) / 3)
    assert scores["exact"] == scores["fuzzy"] == scores["side_effects"]


async def test_whitespace_only_differences_pass_exact(tmp_path):
    report = await judge(candidate(tmp_path, ('print(f"{verb} {path}")', 'print(f"  {verb}   {path}\\t")'),
                                   ('print(f"{verb} {len(matched)} files', 'print(f"\\n{verb} {len(matched)}  files')))
    assert all(report.scores[m] == 1.0 for m in ALL), report.scores
    assert any(v.candidate.stdout != v.oracle.stdout for v in report.verdicts if v.positive)


async def test_a_small_wording_change_passes_fuzzy_not_exact(tmp_path):
    report = await judge(candidate(tmp_path, ("{len(matched)} files (", "{len(matched)} file(s) (")))
    scores = report.scores
    assert scores["exec"] == scores["side_effects"] == scores["fuzzy"] == 1.0
    assert scores["exact"] == 0.0
    assert all(0.8 <= v.similarity < 1.0 for v in report.verdicts if v.positive)


async def test_hidden_path_changes_never_fail_a_case(tmp_path):
    noisy = candidate(tmp_path, ("    verb = ", "    _litter(args.folder)\n    verb = "), extra=(
        "\n\ndef _litter(folder):\n"
        "    os.makedirs('.cache/sweep', exist_ok=True)\n"
        "    with open('.cache/sweep/state.json', 'w') as f:\n        f.write(str(time.time()))\n"
        "    with open(os.path.join(folder, '.sweep-index'), 'w') as f:\n        f.write('x')\n"
        "    os.makedirs(os.path.join(folder, 'sub', '.trash'), exist_ok=True)\n"))
    report = await judge(noisy)
    assert all(report.scores[m] == 1.0 for m in ALL), report.scores
    assert report.scores["reject"] == 1.0
    # the same litter in a visible place is a side effect the oracle does not have
    visible = (noisy / "sweep.py").read_text().replace("'.cache/sweep'", "'cache/sweep'").replace(
        "'.cache/sweep/state.json'", "'cache/sweep/state.json'")
    (noisy / "sweep.py").write_text(visible)
    report = await judge(noisy)
    assert report.scores["exec"] == 1.0 and report.scores["side_effects"] == 0.0
    assert "cache/sweep/state.json" in report.verdicts[0].candidate.side_effects.created


async def test_accepting_bad_input_fails_reject_only(tmp_path):
    report = await judge(candidate(tmp_path, ("        return 1\n", "        return 0\n")))
    cases = by_id(report)
    assert cases["sweep#3"].reject is False and cases["sweep#4"].reject is True
    assert report.scores["reject"] == 0.5
    assert report.scores["fuzzy"] == 1.0  # negative cases stay outside the funnel


async def test_a_hanging_candidate_is_cut_at_the_case_timeout(tmp_path):
    # Only rec#1 hangs; the timeout is generous so that no case that runs normally ever meets it,
    # however loaded the machine.
    hang = candidate(tmp_path, ("    args = parse(argv)\n", ("    args = parse(argv)\n"
                                "    if args.recursive and not args.ext and not args.dry_run:\n"
                                "        time.sleep(3600)\n")))
    command = ToolCommand(run=COMMAND.run, install=COMMAND.install, case_timeout=10)
    report = await judge(hang, command=command)
    cases = by_id(report)
    assert cases["rec#1"].candidate.timed_out and not cases["rec#1"].exec
    assert cases["rec#1"].candidate.duration >= 10  # cut at the timeout, not before (the hang is 3600 s)
    assert cases["rec#1"].runtime_ratio is None
    assert not any(v.candidate.timed_out for v in report.verdicts if v.case_id != "rec#1")
    assert report.classes[1].rate("exec") == 0.5 and report.classes[0].rate("exec") == 1.0


async def test_semantic_judge_command_is_asked_only_when_outputs_differ(tmp_path):
    calls = tmp_path / "judge-calls.txt"
    script = tmp_path / "judge.py"
    script.write_text(
        "import re, sys\n"
        f"open({str(calls)!r}, 'a').write('x')\n"
        "a, b = (open(p).read() for p in sys.argv[1:3])\n"
        "print('yes' if re.findall(r'\\d+', a) == re.findall(r'\\d+', b) else 'no')\n")
    reworded = candidate(tmp_path, ('verb = "would delete" if args.dry_run else "deleted"',
                                    'verb = "would delete" if args.dry_run else "removed"'))
    report = await judge(reworded, judge=CommandJudge(f"{sys.executable} {script}", cwd=tmp_path))
    scores = report.scores
    assert scores["semantic"] == 1.0
    assert scores["exact"] < 1.0
    reworded_cases = [v for v in report.verdicts if v.positive and not v.exact]
    assert len(calls.read_text()) == len(reworded_cases) > 0  # exact matches never reach the judge
    assert all(v.judge_note for v in report.verdicts if v.positive)


async def test_judge_that_cannot_answer_counts_as_no(tmp_path):
    script = tmp_path / "judge.py"
    script.write_text("print('maybe')\n")
    reworded = candidate(tmp_path, ("{len(matched)} files (", "{len(matched)} file(s) ("))
    report = await judge(reworded, judge=CommandJudge(f"{sys.executable} {script}", cwd=tmp_path))
    assert report.scores["semantic"] == 0.0
    assert "no yes/no answer" in report.verdicts[0].judge_note


def counting_executor(runs: dict[str, int]) -> type[LocalExecutor]:
    class Counting(LocalExecutor):
        async def run(self, case, files):
            side = "oracle" if "oracle" in self.root.name else "candidate"
            runs[side] += 1
            return await super().run(case, files)

    return Counting


async def test_the_oracle_runs_once_per_cache_key(tmp_path):
    clear_oracle_cache()
    runs = {"oracle": 0, "candidate": 0}
    counting = counting_executor(runs)
    first = await judge(ORACLE, executor=counting, use_cache=True)
    second = await judge(candidate(tmp_path, ("{len(matched)} files (", "{len(matched)} file(s) (")),
                         executor=counting, use_cache=True)
    assert runs == {"oracle": 8, "candidate": 16}
    assert first.scores["exact"] == 1.0 and second.scores["exact"] == 0.0
    clear_oracle_cache()


async def test_concurrent_trials_share_the_oracle_runs_in_flight(tmp_path):
    clear_oracle_cache()
    runs = {"oracle": 0, "candidate": 0}
    counting = counting_executor(runs)
    reworded = candidate(tmp_path, ("{len(matched)} files (", "{len(matched)} file(s) ("))
    reports = await asyncio.gather(*(judge(folder, executor=counting, use_cache=True)
                                     for folder in (ORACLE, reworded, ORACLE)))
    assert runs == {"oracle": 8, "candidate": 24}
    assert [r.scores["exact"] for r in reports] == [1.0, 0.0, 1.0]
    assert all(r.scores["fuzzy"] == 1.0 for r in reports)
    clear_oracle_cache()


async def test_an_oracle_that_does_not_install_is_our_error(tmp_path):
    broken = tmp_path / "oracle"
    broken.mkdir()
    (broken / "sweep.py").write_text("def broken(:\n")
    with pytest.raises(OracleError, match="oracle does not install"):
        await evaluate(CASES, broken, ORACLE, COMMAND, use_cache=False)


async def test_a_missing_program_is_exit_127_not_a_crash(tmp_path):
    command = ToolCommand(run="no-such-program-xyz {tool}/sweep.py")
    report = await judge(ORACLE, command=command)
    assert all(v.oracle.exit_code == 127 for v in report.verdicts)
    assert not any(c.positives for c in report.classes)


async def test_batches_judge_like_single_cases_and_share_the_oracle_in_flight(tmp_path):
    """The batched path a container side takes (``batch_size = 0``: cases split over the jobs),
    on this machine: the same verdicts as case by case, the oracle's runs still shared."""
    clear_oracle_cache()
    runs = {"oracle": 0, "candidate": 0}
    batches: list[int] = []

    class Batched(counting_executor(runs)):
        batch_size = 0

        async def run_batch(self, items):
            batches.append(len(items))
            return await super().run_batch(items)

    reworded = candidate(tmp_path, ("{len(matched)} files (", "{len(matched)} file(s) ("))
    single = await judge(reworded)
    batched, again = await asyncio.gather(*(judge(folder, executor=Batched, use_cache=True, jobs=2)
                                            for folder in (reworded, reworded)))
    assert runs == {"oracle": 8, "candidate": 16}
    assert sorted(batches) == [2] * 12  # 8 cases over 2 jobs, two batches a job: 4 per side and trial
    for report in (batched, again):
        assert report.as_dict()["classes"] == single.as_dict()["classes"]
        assert [v.case_id for v in report.verdicts] == [v.case_id for v in single.verdicts]
    clear_oracle_cache()
