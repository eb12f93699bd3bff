"""The command schema a task author declares for a CLI tool (seed 001, Eq. 1: S = <C, S_sub, P, K>).

A TOML file: ``[tool]`` (name, how to run and install it, generation seed and size), global
``[[flag]]`` entries (placed before the subcommand words), named ``[fixtures.NAME]`` workspaces,
and one ``[[command]]`` per (sub)command path, with its positional ``[[command.arg]]`` entries,
its ``[[command.flag]]`` entries (types, ranges, example values, required), and its constraints
(``exclusive`` groups, extra flag ``combos``). ``name = "remote add"`` declares a nested
subcommand; ``name = ""`` a tool without subcommands.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..tomlerrors import InputError, load_toml, locate, validate
from .cases import FileSpec

ParamType = Literal["bool", "int", "float", "str", "choice", "path"]
Scalar = str | int | float


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Param(Strict):
    """A flag (``--name``) or, as ``[[command.arg]]``, a positional argument."""

    name: str = Field(min_length=1)
    type: ParamType = "str"
    values: list[Scalar] = []  # common-usage values
    edge: list[Scalar] = []  # boundary values the author knows matter (an empty file, a unicode key)
    choices: list[str] = []
    min: float | None = None
    max: float | None = None
    required: bool = False
    variadic: bool = False  # positional taking one or more values

    @model_validator(mode="after")
    def _coherent(self) -> Param:
        if self.type == "choice" and not self.choices:
            raise ValueError(f"'{self.name}': a choice needs choices")
        if self.type == "bool" and (self.values or self.edge):
            raise ValueError(f"'{self.name}': a bool flag takes no values")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"'{self.name}': min is above max")
        return self

    @property
    def takes_value(self) -> bool:
        return self.type != "bool"


class Arg(Param):
    required: bool = True


class Fixture(Strict):
    files: list[FileSpec] = []


class Command(Strict):
    name: str = ""
    arg: list[Arg] = []
    flag: list[Param] = []
    exclusive: list[list[str]] = []  # at most one flag of each group
    combos: list[list[str]] = []  # extra flag sets that form a class of their own
    fixtures: list[str] = []  # the workspaces its cases start from; default: every fixture
    stdin: list[str] = []  # stdin texts its cases draw from

    @property
    def words(self) -> list[str]:
        return self.name.split()

    @model_validator(mode="after")
    def _known_flags(self) -> Command:
        names = {f.name for f in self.flag}
        for flag in self.flag:
            if not flag.name.startswith("-"):
                raise ValueError(f"flag '{flag.name}' must start with '-'")
        for group in (*self.exclusive, *self.combos):
            unknown = [n for n in group if n not in names]
            if unknown:
                raise ValueError(f"unknown flag {unknown[0]!r} in command '{self.name}'")
        return self


class ToolSection(Strict):
    name: str = Field(min_length=1)
    run: str | None = None  # how to invoke the tool: argv prefix, {tool} = its installed folder
    install: str | None = None  # shell command run in the tool folder (Build)
    seed: int = 0
    cases_per_class: int = Field(50, ge=1, le=1000)
    combo_size: int = Field(1, ge=0, le=3)  # optional flags combined per class


class Schema(Strict):
    tool: ToolSection
    flag: list[Param] = []
    fixtures: dict[str, Fixture] = {}
    command: list[Command] = Field(min_length=1)

    @model_validator(mode="after")
    def _fixtures_known(self) -> Schema:
        for command in self.command:
            for name in command.fixtures:
                if name not in self.fixtures:
                    raise ValueError(f"command '{command.name}' names unknown fixture '{name}'")
        names = [c.name for c in self.command]
        if len(names) != len(set(names)):
            raise ValueError("command names must be unique")
        return self


def load_schema(path: Path) -> tuple[Schema, str]:
    """The schema and the sha256 of its text; errors name file, line and field."""
    data, text = load_toml(path)
    schema = validate(Schema, data, path, text)
    for index, flag in enumerate(schema.flag):
        if not flag.name.startswith("-"):
            raise InputError(path, locate(text, ("flag", index, "name")), f"flag[{index}].name",
                             "a flag name must start with '-'")
    return schema, hashlib.sha256(text.encode()).hexdigest()
