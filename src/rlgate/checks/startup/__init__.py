"""The start-up asserts of NeMo RL (and Megatron-core, Megatron Bridge, vLLM) as rules.

A *rule* is one function of a module of this package, registered with :func:`rule`:

* its ``code`` (the finding's code, unique), its severity (ERROR unless it says), and the
  :class:`Source` s it was read from: file, function and a fragment of the ``assert``/
  ``raise`` it cites (its condition, the branch it sits in, or its message), exactly as
  ``src/rlgate/data/nemo_rl_asserts.json`` (the inventory ``tools/assert_inventory.py``
  builds) holds it. ``tests/unit/test_startup_rules.py`` fails when a rule cites a site the
  inventory does not have, or a config-decidable site names a rule that does not cite it;
* its body: a pure function of the config (:class:`Config`, dict reads only) that yields a
  :class:`Violation` (the key and what is wrong with its value) per problem.

A *model rule* (:func:`model_rule`, module ``model``) is decided by the model's own
``config.json`` too (:mod:`rlgate.serving.model_config`): its ``when`` is the config side of
the site (the rule applies only when it holds), its body a function of the config and the
model config. :func:`check_model` runs them as the ``model-config`` check: not applicable when
no rule's ``when`` holds; when one holds and no ``config.json`` is found, the rules that
``insist`` make the check *skipped* (not run, exit 3), the others are named in its reason.

The module a rule is in is its *area* (``training``, ``sharding``, ``loss``,
``generation``, ``grpo``, ``checkpointing``, ``bridge``): ``rlgate recipe check`` runs each
area as one check (:data:`AREAS`, in that order). Adding a rule is adding a function to the
module of its area, and its test; a new area is a new module and one entry of :data:`AREAS`.

Every rule reads the config as NeMo RL does: a key NeMo RL reads with ``.get(k, default)``
or a pydantic default is read with that default; a key it indexes directly is read as
absent (the rule says nothing: the key schema or the run reports it). Values of the wrong
type (the key schema's ``bad-type``) and unresolved ``${...}`` are treated as absent, so a
rule never raises on junk.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import Recipe, get_path
from rlgate.serving.model_config import ModelConfig, find_model_config, load_model_config

__all__ = [
    "AREAS",
    "MEGATRON_BRIDGE",
    "MEGATRON_LM",
    "NEMO_RL",
    "VLLM",
    "Config",
    "ModelRule",
    "Rule",
    "Source",
    "Violation",
    "check_area",
    "check_model",
    "model_rule",
    "model_rules",
    "rule",
    "rules",
]

NEMO_RL, MEGATRON_LM, VLLM = "NVIDIA-NeMo/RL", "NVIDIA/Megatron-LM", "vllm"
MEGATRON_BRIDGE = "NVIDIA-NeMo/Megatron-Bridge"
_LIBRARY = {
    NEMO_RL: "",
    MEGATRON_LM: "Megatron-core ",
    MEGATRON_BRIDGE: "Megatron Bridge ",
    VLLM: "vLLM ",
}

#: The rule modules, in the order ``recipe check`` runs them (each is one check).
AREAS = ("training", "sharding", "loss", "generation", "grpo", "checkpointing", "bridge")


@dataclass(frozen=True, slots=True)
class Source:
    """Where a rule was read: ``file::function``, and a fragment of the site it cites."""

    file: str
    function: str
    cites: str  # part of the site's condition, its enclosing branch, or its message
    says: str = "asserts"  # how the site fails: "asserts", "raises ValueError"...
    repo: str = NEMO_RL

    @property
    def where(self) -> str:
        """``Megatron-core megatron/core/...::ModelParallelConfig.__post_init__``."""
        return f"{_LIBRARY[self.repo]}{self.file}::{self.function}"


@dataclass(frozen=True, slots=True)
class Violation:
    """One problem a rule found: the key it concerns and what its value does."""

    key: str
    detail: str
    source: int = 0  # which of the rule's sources this violation hits


@dataclass(frozen=True)
class Rule:
    """One registered rule (see the module docstring)."""

    code: str
    area: str
    sources: tuple[Source, ...]
    check: Callable[[Config], Iterable[Violation]]
    severity: Severity

    def findings(self, config: Config) -> list[Finding]:
        """The rule on one config: one finding per violation, citing the rule's source."""
        return _cited(self.code, self.severity, self.sources, self.check(config))


def _cited(
    code: str, severity: Severity, sources: tuple[Source, ...], found: Iterable[Violation]
) -> list[Finding]:
    out = []
    for v in found:
        cite = sources[v.source]
        message = f"{v.detail}: {cite.where} {cite.says} {cite.cites!r}"
        out.append(Finding(code, severity, v.key, message))
    return out


@dataclass(frozen=True)
class ModelRule:
    """One registered model rule (see the module docstring)."""

    code: str
    sources: tuple[Source, ...]
    when: Callable[[Config], bool]
    check: Callable[[Config, ModelConfig], Iterable[Violation]]
    insist: bool
    severity: Severity

    def findings(self, config: Config, model: ModelConfig) -> list[Finding]:
        """The rule on one config and its model: one finding per violation."""
        detail = f" (model config {model.path})"
        found = (Violation(v.key, v.detail + detail, v.source) for v in self.check(config, model))
        return _cited(self.code, self.severity, self.sources, found)


_RULES: dict[str, Rule] = {}


def rule(
    code: str, *sources: Source, severity: Severity = Severity.ERROR
) -> Callable[[Callable[[Config], Iterable[Violation]]], Callable[[Config], Iterable[Violation]]]:
    """Register the decorated function as the rule ``code``, read from ``sources``."""
    if not sources:
        raise TypeError(f"rule {code}: name the source it was read from")

    def register(fn: Callable[[Config], Iterable[Violation]]) -> Any:
        area = fn.__module__.rpartition(".")[2]
        if area not in AREAS:
            raise TypeError(f"rule {code}: module {fn.__module__} is not an area of {AREAS}")
        if code in _MODEL_RULES or (code in _RULES and _RULES[code].check is not fn):
            raise TypeError(f"rule {code} is registered twice")
        _RULES[code] = Rule(code, area, tuple(sources), fn, severity)
        return fn

    return register


_MODEL_RULES: dict[str, ModelRule] = {}


def model_rule(
    code: str,
    *sources: Source,
    when: Callable[[Config], bool],
    insist: bool = True,
    severity: Severity = Severity.ERROR,
) -> Callable[[Callable[[Config, ModelConfig], Iterable[Violation]]], Any]:
    """Register the decorated function as the model rule ``code``, read from ``sources``.

    ``when``: the config side of the site; ``insist``: without a ``config.json`` the rule
    makes the check not run (exit 3); False for rules whose ``when`` holds in ordinary
    configs (TP > 1, a ``max_model_len``), which are then only named as not run.
    """
    if not sources:
        raise TypeError(f"rule {code}: name the source it was read from")

    def register(fn: Callable[[Config, ModelConfig], Iterable[Violation]]) -> Any:
        if code in _RULES or (code in _MODEL_RULES and _MODEL_RULES[code].check is not fn):
            raise TypeError(f"rule {code} is registered twice")
        _MODEL_RULES[code] = ModelRule(code, tuple(sources), when, fn, insist, severity)
        return fn

    return register


def model_rules() -> list[ModelRule]:
    """Every registered model rule, by code."""
    _discover()
    return sorted(_MODEL_RULES.values(), key=lambda r: r.code)


@dataclass(frozen=True, slots=True)
class ModelCheck:
    """What the ``model-config`` check did: its findings, state and reason."""

    findings: list[Finding]
    state: str  # "ran", "skipped" or "not-applicable" (rlgate.checks.recipe_rules.CheckState)
    reason: str = ""
    path: str | None = None  # the config.json the rules read (None: none was read)


def check_model(
    recipe: Recipe, tokenizer_root: str | Path | None, given: ModelConfig | None = None
) -> ModelCheck:
    """The model rules whose ``when`` holds, on the model's ``config.json``.

    ``given`` (``recipe check --model-config``) is used instead of looking for one.
    """
    config = Config(recipe.config)
    due = [r for r in model_rules() if r.when(config)]
    if not due:
        return ModelCheck([], "not-applicable", "no model-decidable rule applies")
    names = ", ".join(r.code for r in due)
    if given is not None:
        found = [f for r in due for f in r.findings(config, given)]
        return ModelCheck(found, "ran", f"{names} on {given.path} (--model-config)", given.path)
    model_id = config.str("policy.model_name")
    path, looked = find_model_config(model_id, tokenizer_root) if model_id else (None, "")
    if path is None:
        what = (
            f"no config.json for {model_id!r} (looked in {looked})"
            if model_id
            else "policy.model_name names no model"
        )
        reason = f"{what}: {names} not run"
        state = "skipped" if any(r.insist for r in due) else "not-applicable"
        return ModelCheck([], state, reason)
    model = load_model_config(path)
    found = [f for r in due for f in r.findings(config, model)]
    return ModelCheck(found, "ran", f"{names} on {model.path} (found for {model_id!r})", path)


_DISCOVERED: list[bool] = []


def _discover() -> None:
    """Import every module of the package once (each registers its rules)."""
    if _DISCOVERED:
        return
    package = importlib.import_module(__name__)
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    _DISCOVERED.append(True)


def rules(area: str | None = None) -> list[Rule]:
    """Every registered rule (of one area), in area order, then code."""
    _discover()
    order = {a: i for i, a in enumerate(AREAS)}
    chosen = [r for r in _RULES.values() if area is None or r.area == area]
    return sorted(chosen, key=lambda r: (order[r.area], r.code))


def check_area(area: str) -> Callable[[Recipe], list[Finding]]:
    """The ``recipe check`` check of one area: every rule of it on the recipe's config."""

    def check(recipe: Recipe) -> list[Finding]:
        config = Config(recipe.config)
        return [f for r in rules(area) for f in r.findings(config)]

    check.__name__ = f"check_{area}"
    return check


class Config:
    """Typed reads of a resolved NeMo RL config; a value of the wrong type reads as absent."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def get(self, key: str, default: Any = None) -> Any:
        """The value at the dotted ``key`` (``default`` when absent)."""
        value = get_path(self.raw, key, _ABSENT)
        return default if value is _ABSENT else value

    def has(self, key: str) -> bool:
        """Whether ``key`` is set (to anything, null included)."""
        return get_path(self.raw, key, _ABSENT) is not _ABSENT

    def int(self, key: str, default: int | None = None) -> int | None:
        """An integer value (not a bool), else None; ``default`` when absent."""
        value = self.get(key, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def num(self, key: str, default: float | None = None) -> float | None:
        """A number (int or float, not a bool), else None; ``default`` when absent."""
        value = self.get(key, default)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else None

    def flag(self, key: str, default: bool | None = False) -> bool | None:
        """A bool value, else None; ``default`` when absent."""
        value = self.get(key, default)
        return value if isinstance(value, bool) else None

    def on(self, key: str, default: bool = False) -> bool:
        """True when ``key`` is true (``default`` when absent); anything else is off."""
        return self.flag(key, default) is True

    def str(self, key: str, default: str | None = None) -> str | None:
        """A string value that is not an unresolved interpolation, else None."""
        value = self.get(key, default)
        return value if isinstance(value, str) and "${" not in value else None

    def section(self, key: str) -> dict[str, Any] | None:
        """A mapping value, else None."""
        value = self.get(key)
        return value if isinstance(value, dict) else None

    # -- facts several rules need ------------------------------------------------------

    @property
    def gym(self) -> bool:
        """The NeMo Gym entry point (``env.should_use_nemo_gym``)."""
        return self.on("env.should_use_nemo_gym")

    @property
    def is_async(self) -> bool:
        """Async GRPO (``grpo.async_grpo.enabled``)."""
        return self.on("grpo.async_grpo.enabled")

    @property
    def backend(self) -> str | None:
        """``policy.generation.backend``."""
        return self.str("policy.generation.backend")

    @property
    def megatron(self) -> bool:
        """The Megatron training backend (``Policy.__init__``: ``megatron_cfg.enabled``)."""
        return self.on("policy.megatron_cfg.enabled")

    @property
    def dtensor(self) -> bool:
        """The DTensor training backend (Megatron off, ``dtensor_cfg.enabled``)."""
        return not self.megatron and self.on("policy.dtensor_cfg.enabled")

    @property
    def dtensor_v1(self) -> bool:
        """DTensor's V1 worker (``dtensor_cfg._v2`` false or absent, ``Policy.__init__``)."""
        return self.dtensor and not self.on("policy.dtensor_cfg._v2")

    @property
    def vllm_async_engine(self) -> bool:
        """Whether vLLM's async engine runs: ``vllm_cfg.async_engine``, or forced on by Gym."""
        return self.gym or self.on("policy.generation.vllm_cfg.async_engine")

    def parallel(self) -> tuple[int, int, int] | None:
        """Training (TP, PP, CP) as ``Policy.__init__`` reads them; None if one is not an int."""
        if self.megatron:
            keys = ("tensor_model_parallel_size", "pipeline_model_parallel_size")
            tp, pp = (self.int(f"policy.megatron_cfg.{k}") for k in keys)
            cp = self.int("policy.megatron_cfg.context_parallel_size")
        elif self.dtensor:
            tp, pp = self.int("policy.dtensor_cfg.tensor_parallel_size"), 1
            cp = self.int("policy.dtensor_cfg.context_parallel_size")
        else:
            return None
        sizes = (tp, pp, cp)
        if any(s is None or s < 1 for s in sizes):
            return None
        return tp, pp, cp  # type: ignore[return-value]

    def training_world(self) -> int | None:
        """GPUs of the policy's training cluster (``grpo.py::setup``), None when unknown."""
        split = _split(self)
        return split[0] if split else None

    def inference_world(self) -> int | None:
        """GPUs of the generation cluster (the policy's when colocated), None when unknown."""
        split = _split(self)
        return split[1] if split else None

    def data_parallel(self) -> int | None:
        """The training data-parallel size: world / (TP x PP x CP), None unless whole."""
        world, sizes = self.training_world(), self.parallel()
        if world is None or sizes is None:
            return None
        model = sizes[0] * sizes[1] * sizes[2]
        return world // model if world >= model and world % model == 0 else None


_ABSENT = object()


def _split(cfg: Config) -> tuple[int, int] | None:
    """(training GPUs, generation GPUs) as ``grpo.py::setup`` places them, or None.

    None when a count is missing or invalid (the topology rules report those), when a
    reward-model environment or non-colocated distillation teachers take nodes (not
    modelled here).
    """
    total, gpn = cfg.int("cluster.num_nodes"), cfg.int("cluster.gpus_per_node")
    if total is None or gpn is None or total < 1 or gpn < 1:
        return None
    if "reward_model" in _env_names(cfg):  # grpo.py::setup: rm_env_enabled
        return None
    if cfg.on("on_policy_distillation.non_colocated_teachers.enabled"):
        return None
    if cfg.flag("policy.generation.colocated.enabled", True) is not False:
        world = total * gpn
        return world, world
    res = "policy.generation.colocated.resources"
    inf_gpn, inf_nodes = cfg.int(f"{res}.gpus_per_node"), cfg.int(f"{res}.num_nodes")
    if total == 1:
        if inf_gpn is None or inf_gpn < 1 or inf_gpn >= gpn:
            return None
        return gpn - inf_gpn, inf_gpn
    if inf_nodes is None or inf_gpn != gpn or not 0 < inf_nodes < total:
        return None
    return (total - inf_nodes) * gpn, inf_nodes * gpn


def _env_names(cfg: Config) -> set[str]:
    names = set()
    for split in ("train", "validation", "default"):
        entries = cfg.get(f"data.{split}")
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, dict) and isinstance(entry.get("env_name"), str):
                names.add(entry["env_name"])
    return names
