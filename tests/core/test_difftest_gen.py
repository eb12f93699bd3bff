"""Case generation from a command schema, the stability filter, and the difftest command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmeter_tui.cli import main
from agentmeter_tui.core.difftest.cases import load_cases
from agentmeter_tui.core.difftest.executor import ToolCommand
from agentmeter_tui.core.difftest.generate import UNKNOWN_FLAG, generate, unroll
from agentmeter_tui.core.difftest.schema import load_schema
from agentmeter_tui.core.tomlerrors import InputError

TOY = '''
import argparse, sys, time
p = argparse.ArgumentParser(prog="toy")
sub = p.add_subparsers(dest="cmd", required=True)
g = sub.add_parser("greet")
g.add_argument("name")
g.add_argument("--times", type=int, default=1)
x = g.add_mutually_exclusive_group()
x.add_argument("--shout", action="store_true")
x.add_argument("--quiet", action="store_true")
sub.add_parser("now")
a = p.parse_args()
if a.cmd == "now":
    print(time.time_ns())
    sys.exit(0)
if not 1 <= a.times <= 5:
    sys.exit("times must be 1..5")
text = f"hello {a.name}"
text = text.upper() if a.shout else text
if not a.quiet:
    print("\\n".join([text] * a.times))
with open("greeted.txt", "a") as f:
    f.write(a.name + "\\n")
'''

SCHEMA = '''
[tool]
name = "toy"
run = "{python} -S {tool}/toy.py"
seed = 3
cases_per_class = 12
combo_size = 2

[fixtures.empty]
files = []

[fixtures.before]
files = [{ path = "greeted.txt", text = "ann\\n" }]

[[command]]
name = "greet"
exclusive = [["--shout", "--quiet"]]

[[command.arg]]
name = "name"
values = ["ann", "bob", "cy", "dee"]
edge = ["", "zoë"]

[[command.flag]]
name = "--times"
type = "int"
min = 1
max = 5
values = [1, 2, 3]

[[command.flag]]
name = "--shout"
type = "bool"

[[command.flag]]
name = "--quiet"
type = "bool"

[[command]]
name = "now"
'''


@pytest.fixture
def toy(tmp_path: Path, request) -> tuple[Path, Path]:
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    (oracle / "toy.py").write_text(TOY)
    schema = tmp_path / "schema.toml"
    size = getattr(request, "param", 12)
    text = SCHEMA.replace("cases_per_class = 12", f"cases_per_class = {size}")
    if size < 12:  # the tests that run the oracle: fewer classes, fewer process starts
        text = text.replace("combo_size = 2", "combo_size = 1")
    schema.write_text(text)
    return schema, oracle


def test_unroll_respects_exclusive_groups(toy):
    schema, _ = load_schema(toy[0])
    ids = [plan.id for plan in unroll(schema)]
    assert ids == ["greet", "greet --times", "greet --shout", "greet --quiet", "greet --times --shout",
                   "greet --times --quiet", "now"]


async def test_cases_are_deterministic_and_cover_errors_and_boundaries(toy):
    schema, sha = load_schema(toy[0])
    first, _ = await generate(schema, sha)
    second, _ = await generate(schema, sha)
    assert first.model_dump() == second.model_dump()
    assert not first.oracle_checked and first.schema_sha256 == sha
    greet_times = next(c for c in first.classes if c.id == "greet --times")
    argvs = [c.argv for c in greet_times.cases]
    assert len(argvs) == 12
    assert len({(tuple(c.argv), c.fixture, c.stdin) for c in greet_times.cases}) == 12  # no case twice
    intents = {c.intent for c in greet_times.cases}
    assert intents == {"common", "boundary", "error"}
    errors = [c.argv for c in greet_times.cases if c.intent == "error"]
    assert ["greet", "--times", "1"] in errors  # the required NAME left out
    assert ["greet", "ann", "--times", "not-a-number"] in errors  # a wrong type
    assert any(a[-1] in ("0", "6") for a in errors)  # out of range
    boundary = [c.argv for c in greet_times.cases if c.intent == "boundary"]
    assert ["greet", "", "--times", "1"] in boundary and ["greet", "ann", "--times", "1"] in boundary
    shout = next(c for c in first.classes if c.id == "greet --shout")
    assert any("--quiet" in c.argv and "--shout" in c.argv for c in shout.cases)  # exclusive partner added
    assert any(UNKNOWN_FLAG in c.argv for c in shout.cases)
    assert {c.fixture for c in shout.cases} == {"empty", "before"}


@pytest.mark.parametrize("toy", [6], indirect=True)  # small: every case runs twice on the oracle
async def test_the_oracle_keeps_only_stable_cases_and_labels_them(toy):
    schema, sha = load_schema(toy[0])
    cases, summary = await generate(schema, sha, toy[1], ToolCommand(run=schema.tool.run), jobs=4)
    assert cases.oracle_checked
    rows = {row[0]: row[1:] for row in summary.classes}
    assert rows["now"][0] == 0 and rows["now"][2] > 0  # its output changes every run: all dropped
    assert rows["now"][1] == 1  # but refusing an unknown option is stable
    positive, negative, unstable = rows["greet --times"]
    assert positive > 0 and negative > 0 and unstable == 0
    greet = next(c for c in cases.classes if c.id == "greet")
    by_argv = {tuple(c.argv): c.oracle_exit for c in greet.cases}
    assert by_argv[("greet",)] == 2  # argparse: a required argument left out
    assert all(c.oracle_exit is not None for cls in cases.classes for c in cls.cases)


def test_schema_errors_name_file_line_and_field(tmp_path):
    bad = tmp_path / "schema.toml"
    bad.write_text(SCHEMA.replace('type = "int"', 'type = "integer"'))
    with pytest.raises(InputError) as info:
        load_schema(bad)
    assert info.value.field == "command[0].flag[0].type"
    assert info.value.line == SCHEMA.splitlines().index('type = "int"') + 1
    bad.write_text(SCHEMA.replace('exclusive = [["--shout", "--quiet"]]', 'exclusive = [["--shout", "--loud"]]'))
    with pytest.raises(InputError, match="unknown flag '--loud'"):
        load_schema(bad)


@pytest.mark.parametrize("toy", [6], indirect=True)
def test_difftest_gen_and_run_commands(toy, tmp_path, capsys):
    schema, oracle = toy
    out = tmp_path / "cases.json"
    assert main(["difftest", "gen", str(schema), "--oracle", str(oracle), "--out", str(out), "--jobs", "4"]) == 0
    err = capsys.readouterr().err
    assert "5 classes" in err and "no case where the oracle succeeds" in err  # the unstable `now`
    cases = load_cases(out)
    assert cases.oracle_checked and cases.case_count() > 20
    run = ["difftest", "run", "--cases", str(out), "--oracle", str(oracle), "--run", "{python} -S {tool}/toy.py"]
    assert main([*run, str(oracle)]) == 0
    assert "R = 1.000 (fuzzy); PASSED" in capsys.readouterr().out
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "toy.py").write_text(TOY.replace('"hello', '"hi'))
    assert main([*run, "--metric", "exact", str(broken)]) == 1
    text = capsys.readouterr().out
    assert "FAILED" in text and "[Exact]" in text
    assert main([*run, "--json", str(oracle)]) == 0
    assert json.loads(capsys.readouterr().out)["scores"]["exec"] == 1.0


def test_difftest_run_reports_bad_input(tmp_path, capsys):
    assert main(["difftest", "run", str(tmp_path), "--cases", str(tmp_path / "none.json"), "--run", "x"]) == 2
    assert "case file not found" in capsys.readouterr().err
    assert main(["difftest", "gen", str(tmp_path / "missing.toml")]) == 2
    bad_cases = tmp_path / "cases.json"
    bad_cases.write_text(json.dumps({"classes": [{"id": "a", "cases": [{"id": "a#1", "argv": "not-a-list"}]}]}))
    assert main(["difftest", "run", str(tmp_path), "--cases", str(bad_cases), "--run", "x"]) == 2
    assert "classes[0].cases[0].argv" in capsys.readouterr().err


def test_case_file_is_written_atomically_and_round_trips(toy, tmp_path):
    import asyncio

    from agentmeter_tui.core.difftest.cases import save_cases

    schema, sha = load_schema(toy[0])
    cases, _ = asyncio.run(generate(schema, sha))
    path = tmp_path / "cases.json"
    save_cases(cases, path)
    assert load_cases(path) == cases
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.json", "oracle", "schema.toml"]  # no temp left
