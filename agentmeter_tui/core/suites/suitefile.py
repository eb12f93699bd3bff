"""``suite.toml``'s tables as pydantic models: what a suite file may say and its defaults.
Loading, task folders and the checks across tables are in :mod:`.suites`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..vocab import MAX_BUDGET_TOKENS, MAX_BUDGET_USD, Tier
from ..wire import provider_kinds
from .budget import Budget
from .strict import Strict


class Cap(Strict):
    """What the whole run, one provider or one model may spend (``core.run.caps``)."""

    usd: float | None = Field(None, gt=0, le=MAX_BUDGET_USD, allow_inf_nan=False)
    tokens: int | None = Field(None, gt=0, le=MAX_BUDGET_TOKENS)

    def merged(self, override: Cap) -> Cap:
        return Cap(**{**self.model_dump(), **override.model_dump(exclude_none=True)})


class Budgets(Strict):
    default: Budget = Budget(wall_seconds=1800)
    easy: Budget | None = None
    medium: Budget | None = None
    hard: Budget | None = None
    run: Cap | None = None  # [budgets.run]: the whole run's spend
    providers: dict[str, Cap] = {}  # [budgets.providers.NAME]
    models: dict[str, Cap] = {}  # [budgets.models."MODEL"]


class ModelEntry(Strict):
    id: str
    provider: str = "scripted"
    price_key: str | None = None  # key into the price snapshot; default: the model id
    cli_names: dict[str, str] = {}  # adapter -> the model name that CLI must send (e.g. a slug it knows)

    @property
    def price_ref(self) -> str:
        return self.price_key or self.id


class CliEntry(Strict):
    adapter: str
    # A grid column of its own for one adapter under other flags or versions: "ADAPTER:VARIANT"
    # (e.g. "claude-code:plan"). Stored as the trial's CLI; the part before ":" names the adapter,
    # so anything that reads a stored trial can still find its parser (harnesses.adapter_name).
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str | None = None  # pinned version; default: the adapter's own pin
    args: list[str] = []
    env: dict[str, str] = {}

    @field_validator("env")
    @classmethod
    def _exec_env(cls, env: dict[str, str]) -> dict[str, str]:
        """What the kernel takes: no NUL byte anywhere, names without "=" (a trial would fail at exec)."""
        for name, value in env.items():
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"{name!r} is not an environment variable name")
            if "\0" in value:
                raise ValueError(f"the value of {name} holds a NUL byte")
        return env

    @field_validator("args")
    @classmethod
    def _exec_args(cls, args: list[str]) -> list[str]:
        if any("\0" in arg for arg in args):
            raise ValueError("an argument holds a NUL byte")
        return args

    @property
    def label(self) -> str:
        """The CLI as the grid, the store and the reports name it."""
        return self.name or self.adapter


class Provider(Strict):
    """Where a model is served. ``scripted``: the project's scripted model server; ``none``: no
    model at all (agents that need none, e.g. the ``command`` adapter in load tests); any other
    kind is a wire protocol's provider kind (``core/wire/``: anthropic, openai, ...)."""

    kind: str = "scripted"
    base_url: str | None = None
    api_key_env: str | None = None  # name of the variable holding the key; the key itself is never stored
    scenarios: str = "scenarios"
    concurrency: int | None = Field(None, ge=1)  # trials at once on this provider, across all hosts
    calls_per_minute: int | None = Field(None, ge=1)  # model calls a minute to it, all trials together (proxy)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        known = provider_kind_names()
        if kind not in known:
            raise ValueError(f"unknown provider kind {kind!r}; known: {', '.join(known)}")
        return kind


def provider_kind_names() -> list[str]:
    """Every provider kind a suite may name: the scripted server, each protocol's, and none."""
    return ["scripted", *provider_kinds(), "none"]


class Scoring(BaseModel):
    """AgentMeter metric settings; ``agentmeter calibrate --write`` fills grids, tau and tiers."""

    model_config = ConfigDict(extra="forbid")
    alpha: float = Field(0.6, ge=0, le=1)
    grids: dict[Tier, list[float]] | None = None
    tau: dict[Tier, float] | None = None
    tiers: dict[str, Tier] | None = None  # task id -> calibrated tier


class ReviewSection(Strict):
    """``[review]``: independent reviews each trial asks for, and the score spread that sends a
    trial to adjudication (``agentmeter review --reviews N`` overrides it per store)."""

    reviews: int = Field(1, ge=1, le=20)
    disagreement: int = Field(2, ge=1, le=3)


class SandboxSection(BaseModel):
    """``kind`` picks the sandbox; the other keys are validated by that sandbox kind."""

    model_config = ConfigDict(extra="allow")
    kind: str = "local"


class SuiteSection(Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str = "1"
    name: str | None = None
    description: str = ""
    trials: int = Field(1, ge=1, le=10_000)
    concurrency: int = Field(4, ge=1, le=512)
    tasks: list[str] | None = None  # explicit order; default: every folder with a task.toml, sorted
    tasks_dir: str | None = None  # tasks read in place from this folder (relative to the suite); default: the suite
    include: list[str] = []  # globs on task folder names under tasks_dir
    exclude: list[str] = []
    pass_threshold: float = Field(1.0, ge=0, le=1)  # Harbor tasks: passed = reward >= this
    own: str | None = None  # the suite author's own configuration ("model|cli") or CLI: the honesty gate
    keep_workspaces: bool = False
    # A finished trial's final workspace kept for `agentmeter regrade` (local and docker sandboxes),
    # up to this size; 0: none kept. Under the store's <db>.kept/; `agentmeter regrade --clean` frees it.
    regrade_keep_mb: int = Field(64, ge=0, le=1024)  # at most what a sandbox copies back (hostfs.FETCH_LIMIT)
    max_retries: int = Field(2, ge=0, le=10)
    kill_on_thrash: bool = False
    thrash_repeats: int = Field(8, ge=2)
    kill_grace: float = Field(5.0, gt=0)
    pricing: str | None = None  # price snapshot, relative to the suite folder
    # meter through the metering proxy; unset: on whenever a model has a real provider (its CLI
    # then never holds the real key), off otherwise. `false` must be said, and its trials warn.
    proxy: bool | None = None


class SuiteFile(Strict):
    suite: SuiteSection
    models: list[ModelEntry] = Field(min_length=1)
    clis: list[CliEntry] = Field(min_length=1)
    providers: dict[str, Provider] = {"scripted": Provider()}
    budgets: Budgets = Budgets()
    scoring: Scoring = Scoring()
    review: ReviewSection = ReviewSection()
    sandbox: SandboxSection = SandboxSection()

    @model_validator(mode="after")
    def _caps_name_known(self) -> SuiteFile:
        for kind, names, known in (("providers", self.budgets.providers, self.providers),
                                   ("models", self.budgets.models, {m.id for m in self.models})):
            unknown = sorted(set(names) - set(known))
            if unknown:
                raise ValueError(f"budgets.{kind}: no such {kind[:-1]}: {', '.join(unknown)}")
        return self

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: list[ModelEntry]) -> list[ModelEntry]:
        ids = [m.id for m in models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"model ids must be unique: {', '.join(dupes)}")
        return models
