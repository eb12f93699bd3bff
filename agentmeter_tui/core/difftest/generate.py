"""Case generation: unroll a command schema into command classes and derive cases for each.

Seed 001 (section 2.2.2) has an LLM write fuzzing scripts; here the derivation is mechanical
and deterministic (a seeded ``random.Random`` per class), from the types and values the schema
declares:

- **classes**: per command, the required parameters alone, plus each set of up to
  ``combo_size`` optional flags that respects the ``exclusive`` groups, plus declared ``combos``;
- **common usage**: random draws of declared values, fixtures in turn, global flags sprinkled;
- **boundary values**: numeric ``min``/``max`` and the author's ``edge`` values, one at a time;
- **error cases**: each required parameter left out, a wrong-typed or out-of-range value, a
  flag from an exclusive group added, an unknown flag, a flag missing its value.

With an oracle, every case runs twice on it and only cases that behave the same both times
(exit code, stdout, side effects) are kept; then each class is cut to ``cases_per_class``,
at most a quarter error cases and a quarter boundary cases.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncio
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from itertools import combinations, count
from pathlib import Path

from .cases import FORMAT, Case, CaseFile, CommandClass, FileSpec
from .executor import LocalExecutor, ToolCommand
from .schema import Command, Param, Schema

UNKNOWN_FLAG = "--no-such-option"
# A parameter's value in a case's assignment: True for a bool flag, one text, or a variadic
# argument's texts. A parameter left out of a case is absent from the assignment.
Value = bool | str | list[str]


@dataclass
class ClassPlan:
    id: str
    command: Command
    flags: list[Param]  # the optional flags that make the class
    required: list[Param]
    optional_globals: list[Param]
    errors: list[Case] = field(default_factory=list)
    boundaries: list[Case] = field(default_factory=list)
    commons: list[Case] = field(default_factory=list)


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def common_values(param: Param) -> list[str]:
    if param.values:
        return [_text(v) for v in param.values]
    if param.type == "choice":
        return list(param.choices)
    if param.type in ("int", "float"):
        low = param.min if param.min is not None else 0
        high = param.max if param.max is not None else low + 10
        middle = (low + high) / 2 if param.type == "float" else int((low + high) // 2)
        return [_text(v) for v in dict.fromkeys([low + 1 if low + 1 <= high else low, middle])]
    return ["value"]


def boundary_values(param: Param) -> list[str]:
    values = [v for v in (param.min, param.max) if v is not None and param.type in ("int", "float")]
    return list(dict.fromkeys(_text(v) for v in [*values, *param.edge]))


def wrong_values(param: Param) -> tuple[list[str], list[str]]:
    """Values of the wrong type, and values outside the declared range."""
    wrong_type: list[str] = []
    out_of_range: list[str] = []
    if param.type in ("int", "float"):
        wrong_type.append("not-a-number")
        if param.type == "int":
            wrong_type.append("1.5")
        if param.min is not None:
            out_of_range.append(_text(param.min - 1))
        if param.max is not None:
            out_of_range.append(_text(param.max + 1))
    elif param.type == "choice":
        wrong_type.append("no-such-choice")
    elif param.type == "path":
        wrong_type.append("no/such/file.txt")
    return wrong_type, out_of_range


def _interleave(groups: list[list[Case]]) -> list[Case]:
    """One of each kind in turn, so a cut keeps every kind of error."""
    merged: list[Case] = []
    for index in range(max((len(g) for g in groups), default=0)):
        merged.extend(g[index] for g in groups if index < len(g))
    return merged


def unroll(schema: Schema) -> list[ClassPlan]:
    """Command classes: (command, a valid set of optional flags)."""
    plans: list[ClassPlan] = []
    optional_globals = [f for f in schema.flag if not f.required]
    required_globals = [f for f in schema.flag if f.required]
    for command in schema.command:
        optional = [f for f in command.flag if not f.required]
        required = [*required_globals, *command.arg, *(f for f in command.flag if f.required)]
        sets: list[tuple[str, ...]] = [()]
        for size in range(1, schema.tool.combo_size + 1):
            for combo in combinations([f.name for f in optional], size):
                if not any(len(set(combo) & set(group)) > 1 for group in command.exclusive):
                    sets.append(combo)
        sets.extend(tuple(c) for c in command.combos)
        by_name = {f.name: f for f in command.flag}
        label = command.name or schema.tool.name
        for flag_set in dict.fromkeys(sets):
            flags = [by_name[n] for n in flag_set if not by_name[n].required]
            plans.append(ClassPlan(id=" ".join([label, *flag_set]), command=command, flags=flags,
                                   required=required, optional_globals=optional_globals))
    return plans


class _Builder:
    """Turns a parameter assignment into a case, in a fixed argv order."""

    def __init__(self, schema: Schema, plan: ClassPlan):
        self.schema, self.plan = schema, plan
        named: list[str | None] = [*(plan.command.fixtures or sorted(schema.fixtures))]
        self.fixtures = named or [None]  # None: no fixture, the case starts in an empty folder
        self.seen: set[tuple] = set()
        self.globals = [*schema.flag]

    def case(self, intent: str, assignment: dict[str, Value], index: int, stdin: str | None,
             extra: Sequence[str] = ()) -> Case | None:
        argv: list[str] = []
        for flag in self.globals:
            argv.extend(self._flag_argv(flag, assignment.get(flag.name)))
        argv.extend(self.plan.command.words)
        for arg in self.plan.command.arg:
            value = assignment.get(arg.name)
            if value is not None:
                argv.extend(value if isinstance(value, list) else [str(value)])
        for flag in self.plan.command.flag:
            argv.extend(self._flag_argv(flag, assignment.get(flag.name)))
        argv.extend(extra)
        fixture = self.fixtures[index % len(self.fixtures)]
        key = (tuple(argv), fixture, stdin)
        if key in self.seen:
            return None
        self.seen.add(key)
        return Case(id="", argv=argv, stdin=stdin, fixture=fixture, intent=intent)

    @staticmethod
    def _flag_argv(flag: Param, value: Value | None) -> list[str]:
        if value is None:  # left out of the case
            return []
        return [flag.name] if not flag.takes_value else [flag.name, str(value)]


def derive(schema: Schema, plan: ClassPlan, pool: int) -> None:
    """Fill ``plan`` with its error, boundary and (up to ``pool``) common cases."""
    rng = random.Random(f"{schema.tool.seed}:{plan.id}")
    build = _Builder(schema, plan)
    params = [*plan.required, *plan.flags]
    optional_args = [a for a in plan.command.arg if not a.required]  # drawn in or left out
    stdins: list[str | None] = [*plan.command.stdin] or [None]  # None: the case gets no stdin

    def base() -> dict[str, Value]:
        return {p.name: (True if not p.takes_value else _first(p)) for p in params}

    turn = count()  # fixtures and stdins in turn over every derived case

    def add(bucket: list[Case], intent: str, assignment: dict[str, Value], extra: Sequence[str] = ()) -> None:
        index = next(turn)
        case = build.case(intent, assignment, index, stdins[index % len(stdins)], extra)
        if case is not None:
            bucket.append(case)

    omitted: list[Case] = []
    wrong_type: list[Case] = []
    out_of_range: list[Case] = []
    conflicts: list[Case] = []
    edges: list[list[Case]] = []
    for param in [*params, *optional_args]:
        if param.required:
            add(omitted, "error", {k: v for k, v in base().items() if k != param.name})
        if param.takes_value:
            types, ranges = wrong_values(param)
            for value in types:
                add(wrong_type, "error", {**base(), param.name: value})
            for value in ranges:
                add(out_of_range, "error", {**base(), param.name: value})
            edges.append([])
            for edge in boundary_values(param):
                add(edges[-1], "boundary", {**base(), param.name: edge})
    class_flags = {f.name for f in plan.flags}
    for flag in plan.flags:
        for group in plan.command.exclusive:
            for other in group:
                if flag.name in group and other != flag.name and other not in class_flags:
                    partner = next(f for f in plan.command.flag if f.name == other)
                    add(conflicts, "error", {**base(), other: True if not partner.takes_value else _first(partner)})
    add(conflicts, "error", base(), [UNKNOWN_FLAG])
    valued = [f for f in plan.flags if f.takes_value]
    if valued:
        add(conflicts, "error", {k: v for k, v in base().items() if k != valued[0].name}, [valued[0].name])
    plan.errors = _interleave([omitted, wrong_type, out_of_range, conflicts])
    plan.boundaries = _interleave(edges)
    for attempt in range(pool * 4):
        if len(plan.commons) >= pool:
            break
        assignment = {param.name: _draw(rng, param) for param in params}
        for optional in (*optional_args, *plan.optional_globals):
            if rng.random() < 0.5:
                assignment[optional.name] = _draw(rng, optional)
        case = build.case("common", assignment, attempt, rng.choice(stdins))
        if case is not None:
            plan.commons.append(case)


def _draw(rng: random.Random, param: Param) -> Value:
    """A common value: True for a bool flag, one to three values for a variadic argument."""
    if not param.takes_value:
        return True
    choices = common_values(param)
    if param.variadic:
        return [rng.choice(choices) for _ in range(rng.randint(1, min(3, len(choices))))]
    return rng.choice(choices)


def _first(param: Param) -> Value:
    first = common_values(param)[0]
    return [first] if param.variadic else first


def select(plan: ClassPlan, n: int, keep: set[int] | None = None) -> list[Case]:
    """At most n cases: up to a quarter errors, a quarter boundaries, commons for the rest,
    then whatever is left over if commons run short. ``keep``: ids of stable cases."""
    def ok(cases: list[Case]) -> list[Case]:
        return [c for c in cases if keep is None or id(c) in keep]

    errors, boundaries, commons = ok(plan.errors), ok(plan.boundaries), ok(plan.commons)
    chosen = errors[: n // 4] + boundaries[: n // 4]
    chosen += commons[: n - len(chosen)]
    rest = errors[n // 4:] + boundaries[n // 4:]
    chosen += rest[: max(0, n - len(chosen))]
    order = {id(c): i for i, c in enumerate(plan.errors + plan.boundaries + plan.commons)}
    chosen.sort(key=lambda c: ("common" != c.intent, order[id(c)]))  # common usage first: easier to read
    return chosen


def to_case_file(schema: Schema, schema_sha: str, plans: list[ClassPlan], chosen: dict[str, list[Case]],
                 oracle_checked: bool) -> CaseFile:
    classes = []
    for plan in plans:
        cases = [c.model_copy(update={"id": f"{plan.id}#{i:02d}"}) for i, c in enumerate(chosen[plan.id], 1)]
        classes.append(CommandClass(id=plan.id, command=plan.command.words, flags=[f.name for f in plan.flags],
                                    cases=cases))
    fixtures = {name: list(f.files) for name, f in sorted(schema.fixtures.items())}
    return CaseFile(format=FORMAT, tool=schema.tool.name, schema_sha256=schema_sha,
                    oracle_checked=oracle_checked, fixtures=fixtures, classes=classes)


@dataclass
class GenerationSummary:
    classes: list[tuple[str, int, int, int]]  # id, positive, negative, dropped as unstable


async def generate(schema: Schema, schema_sha: str, oracle: Path | None = None,
                   command: ToolCommand | None = None, jobs: int = 4) -> tuple[CaseFile, GenerationSummary]:
    """Derive the cases; with an oracle, keep the stable ones and record the oracle's exit codes."""
    n = schema.tool.cases_per_class
    plans = unroll(schema)
    for plan in plans:
        derive(schema, plan, pool=2 * n if oracle else n)
    if oracle is None:
        chosen = {p.id: select(p, n) for p in plans}
        return (to_case_file(schema, schema_sha, plans, chosen, False),
                GenerationSummary([(p.id, 0, 0, 0) for p in plans]))
    assert command is not None
    fixtures = {name: list(f.files) for name, f in schema.fixtures.items()}
    root = Path(tempfile.mkdtemp(prefix="difftest-gen-"))
    side = LocalExecutor(root, command)
    limit = asyncio.Semaphore(jobs)
    try:
        build = await side.build(oracle)
        if not build.ok:
            raise RuntimeError(f"the oracle does not install (exit {build.exit_code}): {build.output.strip()[-500:]}")

        async def twice(case: Case) -> tuple[Case, int | None, bool]:
            files: list[FileSpec] = [*fixtures.get(case.fixture or "", []), *case.files]
            async with limit:
                first = await side.run(case, files)
                second = await side.run(case, files)
            return case, first.exit_code, first.behaviour() == second.behaviour() and not first.timed_out

        everything = [c for p in plans for c in (*p.errors, *p.boundaries, *p.commons)]
        results = await asyncio.gather(*(twice(c) for c in everything))
    finally:
        await side.close()
        shutil.rmtree(root, ignore_errors=True)
    exits = {id(case): code for case, code, stable in results if stable}
    chosen, rows = {}, []
    for plan in plans:
        picked = select(plan, n, keep=set(exits))
        chosen[plan.id] = [c.model_copy(update={"oracle_exit": exits[id(c)]}) for c in picked]
        total = len(plan.errors) + len(plan.boundaries) + len(plan.commons)
        unstable = total - sum(1 for c in (*plan.errors, *plan.boundaries, *plan.commons) if id(c) in exits)
        positive = sum(1 for c in chosen[plan.id] if c.oracle_exit == 0)
        rows.append((plan.id, positive, len(chosen[plan.id]) - positive, unstable))
    return to_case_file(schema, schema_sha, plans, chosen, True), GenerationSummary(rows)
