"""Load NeMo RL configs (rlgate recipes and NeMo RL's own) into typed ``Recipe`` records.

Loading follows NeMo RL's own semantics (``nemo_rl/utils/config.py``) so that what
rlgate checks is what ``run_grpo_nemo_gym.py`` would run:

* ``defaults:`` (a path or a list of paths, relative to the file that names them)
  is followed depth-first; later parents and the child win;
* a section carrying ``_override_: true`` replaces the parent's section instead of
  being merged into it;
* dotted overrides use Hydra's override grammar on a struct config, exactly as
  NeMo RL applies them: ``a.b=c`` must name an existing key, ``++a.b=c`` adds or
  sets, ``~a.b`` deletes;
* ``${...}`` interpolations (and NeMo RL's ``mul``/``add``/``div``/``max``
  resolvers) are resolved. One that cannot be resolved here (an ``oc.env``
  variable only the cluster sets) is kept verbatim and reported, not fatal.

The top-level ``rlgate:`` block (gate bounds, tiers, expectations) is rlgate's
own; NeMo RL's ``MasterConfig`` allows extra keys, so a recipe carrying it still
runs as-is. It is split off into ``Recipe.gate``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlgate._errors import RecipeError
from rlgate._io import read_yaml

__all__ = [
    "GATE_KEY",
    "FunctionalGate",
    "KnownLimitation",
    "Recipe",
    "Unresolved",
    "flatten",
    "functional_gate",
    "get_path",
    "load_recipe",
    "recipe_files",
    "recipe_tiers",
]

GATE_KEY = "rlgate"


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An interpolation that could not be resolved on this machine."""

    key: str
    expression: str
    reason: str


@dataclass(frozen=True, slots=True)
class Recipe:
    """A loaded NeMo RL config plus rlgate's gate block.

    Attributes:
        name: file stem; also the test id and run-directory name.
        path: the file loaded.
        config: the resolved NeMo RL config (``rlgate`` block removed).
        gate: the raw ``rlgate:`` mapping (``{}`` when absent).
        overrides: the dotted overrides applied, in order.
        sources: every file of the ``defaults:`` chain, child last.
        unresolved: interpolations kept verbatim (e.g. unset ``oc.env`` variables).
    """

    name: str
    path: Path
    config: dict[str, Any]
    gate: dict[str, Any]
    overrides: tuple[str, ...] = ()
    sources: tuple[Path, ...] = ()
    unresolved: tuple[Unresolved, ...] = field(default=())


def _register_resolvers() -> None:
    # The same arithmetic resolvers NeMo RL registers before loading configs.
    for name, fn in {
        "add": lambda a, b: a + b,
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "max": lambda a, b: max(a, b),
    }.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


def _load_yaml(path: Path) -> DictConfig:
    raw = read_yaml(path, what="config file", error=RecipeError)
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a NeMo RL config must be a mapping, got {type(raw).__name__}")
    try:
        return OmegaConf.load(path)  # keeps interpolations unresolved
    except OmegaConfBaseException as exc:
        raise RecipeError(f"{path}: {exc}") from exc


def _merge(base: DictConfig, child: DictConfig) -> DictConfig:
    for key in list(child.keys()):
        if OmegaConf.is_missing(child, key):
            continue
        node = child[key]
        if isinstance(node, DictConfig) and node.get("_override_", False):
            node.pop("_override_")
            if key in base:
                base.pop(key)
    merged = OmegaConf.merge(base, child)
    assert isinstance(merged, DictConfig)
    return merged


def _load_chain(path: Path, seen: tuple[Path, ...]) -> tuple[DictConfig, list[Path]]:
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise RecipeError(f"circular defaults chain: {chain}")
    cfg = _load_yaml(path)
    sources: list[Path] = []
    if "defaults" in cfg:
        defaults = cfg.pop("defaults")
        parents = [defaults] if isinstance(defaults, str) else list(defaults or [])
        base = OmegaConf.create({})
        for parent in parents:
            parent_path = Path(str(parent))
            if not parent_path.is_absolute():
                parent_path = path.parent / parent_path
            if not parent_path.is_file():
                raise RecipeError(
                    f"{path}: defaults entry {parent!r} not found (looked for {parent_path})",
                    hint="defaults paths are relative to the file that names them",
                )
            parent_cfg, parent_sources = _load_chain(parent_path, (*seen, path))
            sources.extend(parent_sources)
            base = _merge(base, parent_cfg)
        cfg = _merge(base, cfg)
    sources.append(path)
    return cfg, sources


def _apply_overrides(cfg: DictConfig, overrides: Sequence[str]) -> DictConfig:
    if not overrides:
        return cfg
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    OmegaConf.set_struct(cfg, True)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
        ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)
    except Exception as exc:  # hydra raises several unrelated exception types
        raise RecipeError(
            f"cannot apply overrides {list(overrides)}: {exc}",
            hint="use key=value for existing keys, ++key=value to add, ~key to delete "
            "(NeMo RL's Hydra override syntax)",
        ) from exc
    finally:
        OmegaConf.set_struct(cfg, False)
    return cfg


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path, value
            yield from _walk(value, path)


def _resolve(cfg: DictConfig) -> tuple[dict[str, Any], list[Unresolved]]:
    """Resolve interpolations node by node, keeping the ones that cannot resolve here."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)
    unresolved: list[Unresolved] = []

    def resolve_node(node: Any, path: str) -> Any:
        if isinstance(node, dict):
            return {k: resolve_node(v, f"{path}.{k}" if path else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve_node(v, f"{path}[{i}]") for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            try:
                value = OmegaConf.select(cfg, path, throw_on_resolution_failure=True)
            except OmegaConfBaseException as exc:
                reason = str(exc).splitlines()[0]
                unresolved.append(Unresolved(path, node, reason))
                return node
            if isinstance(value, DictConfig | ListConfig):
                return OmegaConf.to_container(value, resolve=True)
            return value
        return node

    return resolve_node(raw, ""), unresolved


def load_recipe(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> Recipe:
    """Load a NeMo RL GRPO config (with ``defaults:`` chain) and apply dotted overrides.

    Raises:
        RecipeError: the file, a parent or an override cannot be loaded or applied.
    """
    _register_resolvers()
    file = Path(path)
    cfg, sources = _load_chain(file, ())
    cfg = _apply_overrides(cfg, overrides)
    resolved, unresolved = _resolve(cfg)
    gate = resolved.pop(GATE_KEY, None) or {}
    if not isinstance(gate, dict):
        raise RecipeError(f"{file}: the `{GATE_KEY}:` block must be a mapping")
    # List elements are not addressable by OmegaConf.select paths; drop their noise.
    unresolved = [u for u in unresolved if not u.key.startswith(f"{GATE_KEY}.")]
    return Recipe(
        name=file.stem,
        path=file,
        config=resolved,
        gate=gate,
        overrides=tuple(overrides),
        sources=tuple(sources),
        unresolved=tuple(unresolved),
    )


def recipe_files(root: str | os.PathLike[str]) -> list[Path]:
    """Rlgate's recipes under ``root``: ``*.yaml`` and one level of subfolders, except ``base/``."""
    top = Path(root)
    files = sorted(top.glob("*.yaml")) + sorted(
        p for p in top.glob("*/*.yaml") if p.parent.name != "base"
    )
    return files


TIERS = ("functional", "convergence", "perf", "swe_gate")


def recipe_tiers(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The tiers a recipe file declares in ``rlgate.tiers`` (read without loading its chain)."""
    raw = read_yaml(path, what="recipe", error=RecipeError) or {}
    gate = raw.get(GATE_KEY) if isinstance(raw, dict) else None
    tiers = gate.get("tiers") if isinstance(gate, dict) else None
    if tiers is None:
        return TIERS
    unknown = sorted(set(tiers) - set(TIERS))
    if unknown:
        raise RecipeError(f"{path}: rlgate.tiers has unknown tier(s) {unknown}; known: {TIERS}")
    return tuple(tiers)


def get_path(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """Return ``config[a][b][c]`` for ``"a.b.c"``, or ``default`` when any level is absent."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return every key path of ``config`` (mappings descended, lists kept as leaves)."""
    return dict(_walk(config))


class KnownLimitation(BaseModel):
    """A documented, real limitation a functional check is expected to hit (strict xfail)."""

    model_config = ConfigDict(extra="forbid")
    check: Literal["contiguity", "round_trip", "streaming"]
    scenario: str
    reason: str


class FunctionalGate(BaseModel):
    """The ``rlgate.functional`` block of a recipe."""

    model_config = ConfigDict(extra="forbid")
    expect: Literal["pass", "reject"] = "pass"
    reject_codes: list[str] = Field(default_factory=list)
    data_tool_format: Literal["xml", "json"] | None = None
    data_reasoning: bool | None = None
    known_limitations: list[KnownLimitation] = Field(default_factory=list)


def functional_gate(recipe: Recipe) -> FunctionalGate:
    """Validate the recipe's ``rlgate.functional`` block."""
    try:
        return FunctionalGate.model_validate(recipe.gate.get("functional") or {})
    except ValidationError as exc:
        raise RecipeError(f"{recipe.path}: invalid rlgate.functional block: {exc}") from exc
