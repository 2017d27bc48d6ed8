"""The suite schema (pydantic): tasks, models, sweeps, expectations, profiles."""

from __future__ import annotations

import math
from typing import Annotated, Any

import re

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, model_validator, PrivateAttr, Tag, field_validator

from compbench.limits import MAX_SEED, limits
from compbench.params import StrictParams

# Ids become parts of file names (plots/theory-<task>.png, results/<suite>/) and of every report
# line: one pattern, short enough for any file system, and nothing a shell, a spreadsheet, a
# markdown table or a terminal reads as syntax.
ID_MAX_LENGTH = 64
ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.+-]{{0,{ID_MAX_LENGTH - 1}}}$"
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
# Always fullmatch: with re.match, `$` also matches before a trailing newline, so "add\n" would pass
# and name a file `plots/theory-add\n.png`.
_ID = re.compile(ID_PATTERN)
_TAG = re.compile(TAG_PATTERN)


def is_tag(v: object) -> bool:
    """Whether `v` is a tag: letters, digits, '_', '.', '-', starting with a letter or digit (nothing after)."""
    return isinstance(v, str) and _TAG.fullmatch(v) is not None


def check_id(v: str) -> str:
    """An id of 1-64 letters, digits, '_', '.', '+', '-' starting with a letter or digit, else ValueError."""
    if not _ID.fullmatch(v):
        shown = repr(v) if len(v) <= 40 else f"{v[:40]!r}… ({len(v):,} characters)"
        raise ValueError(f"an id is 1 to {ID_MAX_LENGTH} letters, digits, '_', '.', '+' or '-', starting with a letter or "
                         f"digit (ids name files and report rows); got {shown}")
    return v


Id = Annotated[str, AfterValidator(check_id)]


class _Strict(StrictParams):
    """Schema sections: unknown keys are errors, and a boolean is not a number (`seeds: true`)."""


def _finite(v: float, what: str) -> float:
    if not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number, got {v}")
    return v


def _spaced(v: tuple[float, float, int], form: str, one_sign: bool = False) -> tuple[float, float, int]:
    """A sweep's [start, stop, num]: finite ends (non-zero and of one sign with `one_sign`), a count ≥ 1."""
    a, b = _finite(v[0], f"{form} start"), _finite(v[1], f"{form} stop")
    if one_sign and (a == 0 or b == 0 or (a < 0) != (b < 0)):
        raise ValueError(f"{form} ends must be non-zero and of one sign, got {a:g} and {b:g}")
    if v[2] < 1:
        raise ValueError(f"{form} needs a count ≥ 1, got {v[2]}")
    return v


class Linspace(_Strict):
    """`{linspace: [start, stop, num]}`: evenly spaced sweep values (numpy.linspace)."""

    linspace: tuple[float, float, int]

    @field_validator("linspace")
    @classmethod
    def _check(cls, v: tuple[float, float, int]) -> tuple[float, float, int]:
        return _spaced(v, "linspace")


class Geomspace(_Strict):
    """`{geomspace: [start, stop, num]}`: log-spaced sweep values (numpy.geomspace)."""

    geomspace: tuple[float, float, int]

    @field_validator("geomspace")
    @classmethod
    def _check(cls, v: tuple[float, float, int]) -> tuple[float, float, int]:
        return _spaced(v, "geomspace", one_sign=True)


def _sweep_kind(v: Any) -> str | None:
    """Which form a sweep axis takes, so a mistake in one form is reported once, not once per form."""
    if isinstance(v, (Linspace, Geomspace)):
        return type(v).__name__.lower()
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        for kind in ("linspace", "geomspace"):
            if kind in v:
                return kind
    return None


SweepValues = Annotated[
    Annotated[list[Any], Tag("list")] | Annotated[Linspace, Tag("linspace")] | Annotated[Geomspace, Tag("geomspace")],
    Discriminator(
        _sweep_kind,
        custom_error_type="sweep_axis",
        custom_error_message="a sweep axis is a list of values, {linspace: [start, stop, num]} or {geomspace: [start, stop, num]}",
    ),
]


def check_seeds(v: int | list[int] | None) -> int | list[int] | None:
    """A seed count 1..limit, or a list of distinct non-negative seeds."""
    if v is None:
        return v
    if isinstance(v, int):
        if v < 1:
            raise ValueError(f"seeds must be a count ≥ 1 or a list of seeds, got {v}")
        if v > limits().seeds:
            raise ValueError(f"seeds asks for {v:,} seeds; the limit is {limits().seeds:,} per model (raise it with --max-seeds)")
        return v
    if not v:
        raise ValueError("a seed list must not be empty")
    if any(s < 0 for s in v):
        raise ValueError(f"seeds must be non-negative, got {[s for s in v if s < 0]}")
    if any(s > MAX_SEED for s in v):
        raise ValueError(f"seeds must be at most {MAX_SEED:,} (2**32 - 1, what numpy and torch seeding take), "
                         f"got {[s for s in v if s > MAX_SEED][:3]}")
    if len(set(v)) != len(v):
        raise ValueError(f"seed list has repeats ({sorted({s for s in v if v.count(s) > 1})}): each seed would count twice")
    if len(v) > limits().seeds:
        raise ValueError(f"seeds lists {len(v):,} seeds; the limit is {limits().seeds:,} per model (raise it with --max-seeds)")
    return v


class TaskEntry(_Strict):
    """One task of a suite: a family with its parameters and an input encoding."""

    id: Id
    family: str
    params: dict[str, Any] = Field(default_factory=dict)
    encoding: str | dict[str, Any] = Field(
        default="onehot", description="an encoding name, or {name: ..., <encoding params>}"
    )
    description: str = ""

    @property
    def encoding_name(self) -> str:
        """The encoding's registered name."""
        return self.encoding if isinstance(self.encoding, str) else str(self.encoding.get("name", ""))

    @property
    def encoding_params(self) -> dict[str, Any]:
        """The encoding's parameters (everything but its name)."""
        return {} if isinstance(self.encoding, str) else {k: v for k, v in self.encoding.items() if k != "name"}


class ModelEntry(_Strict):
    """One model (or a sweep of models) of a suite: an adapter with parameters."""

    id: Id
    adapter: str
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, SweepValues] = Field(
        default_factory=dict, description="grid over params: dotted path -> values (product)"
    )
    tasks: list[str] = Field(default_factory=lambda: ["*"], description="task id patterns to run on")
    seeds: int | list[int] | None = None
    tags: list[str] = Field(default_factory=list, description="labels expectations select models by (`models: ['@tag']`)")
    skip_invalid: bool = Field(
        default=False, description="drop sweep members whose model is invalid for a task (non-PSD kernel)"
    )
    description: str = ""

    _check_seeds = field_validator("seeds")(classmethod(lambda cls, v: check_seeds(v)))

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if not is_tag(t)]
        if bad:
            raise ValueError(f"tags are names of letters, digits, '_', '.', '-': got {bad}")
        return v


DEFAULT_PROFILE = "default"  # the profile name a known failure's scope uses for a run without --profile


def _text(v: str, what: str) -> str:
    if not v.strip():
        raise ValueError(f"{what} must not be empty")
    return v


class Source(_Strict):
    """Where a claim comes from: a paper (with the figure or table and the number it reproduces), or compbench's own reading of the theory.

    `threshold` says how the expectation's threshold was derived from that number or from the theory, never
    from what one run happened to measure.
    """

    paper: str = Field(description="the paper (authors, venue, year), or `compbench` for the harness's own theory reading")
    where: str = Field(default="", description="figure, table or section of the paper (required for a paper)")
    value: str = Field(default="", description="the number the paper reports, as it reports it (required for a paper)")
    threshold: str = Field(description="how the threshold was derived from `value` or from the theory")
    url: str = Field(default="", description="a link to the paper or its code")

    _nonempty = field_validator("paper", "threshold")(classmethod(lambda cls, v, info: _text(v, info.field_name)))

    @property
    def is_compbench(self) -> bool:
        """Whether the claim is the harness's own reading of the theory (no paper number to reproduce)."""
        return self.paper.strip().lower() == "compbench"

    @model_validator(mode="after")
    def _complete(self) -> "Source":
        if not self.is_compbench:
            missing = [f for f in ("where", "value") if not getattr(self, f).strip()]
            if missing:
                raise ValueError(f"a paper source names {' and '.join(missing)} (the figure or table, and the number "
                                 "it reports); use `paper: compbench` for the harness's own reading of the theory")
        if self.url and not re.fullmatch(r"https?://[^\s<>\"'`]+", self.url):
            raise ValueError(f"url must be an http(s) address, got {self.url!r}")
        return self

    def cite(self) -> str:
        """One line: the paper, where, and the number ("compbench's reading of the theory" for the harness's own)."""
        if self.is_compbench:
            return f"compbench's reading of the theory: {' '.join(self.threshold.split()).rstrip('.')}"
        return f"{self.paper}, {self.where}: {self.value}"


class KnownFailure(_Strict):
    """A failure the suite declares, scoped: it absorbs only the verdicts of these profiles, models and tasks.

    A failing verdict inside the scope is XFAIL; a passing one is XPASS and fails the outcome (strict, as
    pytest's strict xfail), so a declaration that no longer holds is removed. `measured` is the range the
    declaration was made for: a value outside it is absorbed but warned about.
    """

    reason: str = Field(description="why the claim does not hold here (measured, not guessed)")
    profiles: list[str] = Field(min_length=1, description=f"profiles it applies to (`{DEFAULT_PROFILE}`: a run without --profile)")
    models: list[str] = Field(min_length=1, description="model id globs, sweep ids or @tags it applies to")
    tasks: list[str] = Field(min_length=1, description="task id globs it applies to")
    measured: tuple[float, float] = Field(description="[lo, hi]: the measured values the declaration was made for")

    _nonempty = field_validator("reason")(classmethod(lambda cls, v: _text(v, "reason")))

    @field_validator("measured")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = (_finite(x, "measured") for x in v)
        if lo > hi:
            raise ValueError(f"measured is [lo, hi] with lo ≤ hi, got [{lo:g}, {hi:g}]")
        return v


def _known_list(v: Any) -> Any:
    if isinstance(v, str):
        raise ValueError("known_failure is scoped: {reason, profiles, models, tasks, measured: [lo, hi]} (or a list of "
                         "them), so that a new failure of another model, task or profile is not absorbed")
    return [v] if isinstance(v, dict) else v


class Expectation(BaseModel):
    """A claim of the theory as data: which claim, on which models and tasks, with the claim's own params.

    Everything but `id`, `claim`, `models`, `tasks`, `description`, `source` and `known_failure` is a parameter
    of the claim, validated by the claim's params model when the suite loads.
    """

    model_config = ConfigDict(extra="allow")

    id: Id | None = None
    claim: str
    models: list[str] = Field(min_length=1, description="model id globs, sweep ids, or @tag")
    tasks: list[str] = Field(min_length=1)
    description: str = ""
    # Optional here so that code can build an Expectation; a suite file without it is refused by validation.
    source: Source | None = Field(default=None, description="the paper, figure and number the claim reproduces (or "
                                                            "`paper: compbench`), and how its threshold was derived")
    known_failure: Annotated[list[KnownFailure], BeforeValidator(_known_list)] = Field(
        default_factory=list, description="scoped failures the suite declares: a failing verdict in scope is XFAIL, "
                                          "a passing one XPASS (which fails the outcome)")
    _params: Any = PrivateAttr(default=None)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> Any:
        # `source: "compbench: <derivation>"` is the short form of the harness's own reading.
        if isinstance(v, str):
            head, sep, rest = v.partition(":")
            if head.strip().lower() == "compbench" and sep and rest.strip():
                return {"paper": "compbench", "threshold": rest.strip()}
            raise ValueError("source is {paper, where, value, threshold[, url]}, or the string "
                             "\"compbench: <how the threshold follows from the theory>\"")
        return v

    def claim_options(self) -> dict[str, Any]:
        """The claim's parameters as written (everything not a common field)."""
        return dict(self.model_extra or {})

    def claim_params(self) -> Any:
        """The claim's validated params (validated on first use when the suite loader has not)."""
        if self._params is None:
            from compbench.claims import get_claim

            self._params = get_claim(self.claim).Params.model_validate(self.claim_options())
        return self._params


class Profile(_Strict):
    """Named overrides (e.g. `full` for GPU runs): seeds, per-model params and per-task params."""

    description: str = ""
    seeds: int | list[int] | None = None
    params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="model id -> params merged over that model's params"
    )
    task_params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="task id -> params merged over that task's family params"
    )
    encodings: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="task id -> encoding params merged over that task's encoding (e.g. {source: mnist-5k}); '*' for every task",
    )

    _check_seeds = field_validator("seeds")(classmethod(lambda cls, v: check_seeds(v)))


class Suite(_Strict):
    """A benchmark suite: tasks × models × seeds, plus expectations."""

    name: Id
    description: str = ""
    seeds: int | list[int] = 3
    tasks: list[TaskEntry] = Field(min_length=1)
    models: list[ModelEntry] = Field(min_length=1)
    expectations: list[Expectation] = Field(default_factory=list)
    profiles: dict[str, Profile] = Field(default_factory=dict)
    added_networks: dict[str, Any] = Field(
        default_factory=dict,
        description="training parameters of a network added with --model or compbench.evaluate (its adapter's "
        "defaults otherwise; --model-args override them), so it trains as the suite's own networks do",
    )
    fit_threshold: dict[str, float] = Field(
        default_factory=dict,
        description="training metric -> the score a model must reach on its training cells (mean over seeds; train_acc, "
        "train_r2: at least, train_mse: at most); one that does not is warned about, never failed. Defaults: "
        "train_acc 0.9; train_r2 and train_mse none (a train_r2 is measured at new inputs, an MSE's scale is the task's)",
    )

    _check_seeds = field_validator("seeds")(classmethod(lambda cls, v: check_seeds(v)))

    @field_validator("fit_threshold")
    @classmethod
    def _check_fit_threshold(cls, v: dict[str, float]) -> dict[str, float]:
        from difflib import get_close_matches

        from compbench.records.metric_facts import fit_metrics

        allowed = fit_metrics()
        for metric, threshold in v.items():
            if metric not in allowed:
                close = get_close_matches(metric, allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(f"{metric!r} is not a training metric a fit threshold applies to; {hint}"
                                 f"choose from {', '.join(allowed)}")
            _finite(threshold, f"fit_threshold.{metric}")
            if metric == "train_acc" and not 0 <= threshold <= 1:
                raise ValueError(f"fit_threshold.train_acc is an accuracy, from 0 to 1; got {threshold:g}")
            if metric == "train_r2" and threshold > 1:
                raise ValueError(f"fit_threshold.train_r2 is an R², at most 1; got {threshold:g}")
            if metric == "train_mse" and threshold < 0:
                raise ValueError(f"fit_threshold.train_mse is an MSE, at least 0; got {threshold:g}")
        return v
