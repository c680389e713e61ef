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
  resolvers) are resolved. One that cannot be resolved here is kept verbatim and
  recorded in ``Recipe.unresolved`` with its cause: an ``oc.env`` variable only the
  cluster sets (``kind="env"``, may resolve where the run starts) or a reference that
  can never resolve, e.g. ``${nope}`` naming no config key (``kind="missing-key"``) or
  an unknown resolver (``kind="resolver"``).

Every file of the ``defaults:`` chain is read with :func:`rlgate.core.io.read_yaml`
(strict UTF-8, alias-bomb budget) and refused when nested deeper than
``MAX_DEPTH`` before OmegaConf parses it; ``defaults:`` must be a path or a list
of paths (NeMo RL's ``load_config_with_inheritance`` crashes on anything else).

Then everything rlgate reads is validated once, here, into typed records; no command
looks a dotted key up again:

* the top-level ``rlgate:`` block (tiers, functional expectations, gate bounds) is rlgate's
  own (NeMo RL's ``MasterConfig`` allows extra keys, so a recipe carrying it still runs
  as-is). It is split off and parsed into ``Recipe.gate`` with the ``gate`` schema given;
  an invalid block is a ``RecipeError`` listing every problem. The commands load through
  :func:`rlgate.checks.registry.load_recipe`, which gives the schema the check kinds
  assemble (their sections typed, unknown keys refused); the default, the generic
  :class:`~rlgate.recipe.spec.GateSpec`, validates the keys every tier reads and keeps the
  check sections as given (what a caller below the checks layer can know);
* the config facts the commands use (cluster shape, steps, batch, sequence limits, agent
  turns, async flags, model and tokenizer, serving kwargs...) are read into ``Recipe.facts``,
  a :class:`~rlgate.recipe.facts.RunFacts`, as NeMo RL's pydantic ``MasterConfig`` reads
  them. Absent, null or unresolved facts are ``None``; an invalid one (wrong type, a count
  below 1) is one ``RecipeError`` naming key and value, except with ``strict=False``, which
  ``rlgate recipe check`` uses: its rules and key schema read ``Recipe.config`` itself and
  report such values as findings.

``Recipe.config`` keeps the whole resolved config (a plain dict, unresolved interpolations
verbatim) for what reads arbitrary keys: the recipe check rules, the schema, the manifest.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import (
    InterpolationKeyError,
    InterpolationToMissingValueError,
    OmegaConfBaseException,
    UnsupportedInterpolationType,
)
from omegaconf.resolvers import oc as oc_resolvers

from rlgate.core.errors import RecipeError
from rlgate.core.io import budget_loader, memoise, read_text, read_yaml, yaml_problem
from rlgate.recipe.facts import RunContext, RunFacts, context_from_facts, read_facts
from rlgate.recipe.spec import TIERS, FunctionalGate, GateSpec, KnownLimitation, parse_gate

__all__ = [
    "GATE_KEY",
    "OTHER_ALGORITHMS",
    "FunctionalGate",
    "KnownLimitation",
    "Recipe",
    "RunFacts",
    "Unresolved",
    "config_files",
    "flatten",
    "functional_gate",
    "get_path",
    "load_recipe",
    "recipe_files",
    "recipe_tiers",
    "require_grpo",
]

GATE_KEY = "rlgate"


UnresolvedKind = Literal["env", "missing-key", "resolver", "missing-value"]


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An interpolation that could not be resolved on this machine.

    ``kind`` says whether it can still resolve where the run starts: ``env`` (an
    ``oc.env`` variable not set here) and ``missing-value`` (it points at a ``???``
    value, reported on its own) can; ``missing-key`` (no such config key) and
    ``resolver`` (a resolver NeMo RL does not register) never can.
    """

    key: str
    expression: str
    reason: str
    kind: UnresolvedKind = "env"

    @property
    def fatal(self) -> bool:
        """True when the interpolation fails wherever the run starts."""
        return self.kind in ("missing-key", "resolver")


@dataclass(frozen=True, slots=True)
class Recipe:
    """A loaded NeMo RL config, its typed facts and rlgate's gate block.

    Attributes:
        name: file stem; also the test id and run-directory name.
        path: the file loaded.
        config: the resolved NeMo RL config (``rlgate`` block removed).
        gate: the ``rlgate:`` block, validated with the schema ``load_recipe`` was given
            (empty when absent).
        facts: what rlgate reads from ``config``, typed and validated.
        overrides: the dotted overrides applied, in order.
        sources: every file of the ``defaults:`` chain, child last.
        unresolved: interpolations kept verbatim (e.g. unset ``oc.env`` variables).
    """

    name: str
    path: Path
    config: dict[str, Any]
    gate: GateSpec = field(default_factory=GateSpec)
    facts: RunFacts = field(default_factory=RunFacts)
    overrides: tuple[str, ...] = ()
    sources: tuple[Path, ...] = ()
    unresolved: tuple[Unresolved, ...] = field(default=())

    def run_context(self, max_steps: int | None = None) -> RunContext:
        """The facts the convergence and perf bounds are relative to (``--max-steps`` wins).

        Raises:
            RecipeError: ``max_steps`` is not a positive step count.
        """
        return context_from_facts(
            self.facts,
            self.gate,
            recipe=self.name,
            max_steps=max_steps,
            base_dir=Path(self.path).parent,
        )


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


# NeMo RL configs nest about ten levels; OmegaConf recurses a few frames per level and
# overflows Python's stack near 300. A deeper document is refused before OmegaConf sees it.
MAX_DEPTH = 64


def _depth(node: Any) -> int:
    """Nesting depth of a parsed YAML document (iterative: never recurses itself)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, level + 1) for c in children if isinstance(c, dict | list))
    return deepest


def _omegaconf_loader() -> type:
    """OmegaConf's own YAML loader, with rlgate's alias budget, parsed by libyaml.

    The rules are ``OmegaConf.load``'s (NeMo RL's ``load_config``): 1e-6 is a float,
    duplicate keys are refused, no timestamps.
    """
    from omegaconf._utils import get_yaml_loader

    return budget_loader(get_yaml_loader())


_OMEGACONF_LOADER = _omegaconf_loader()
#: What OmegaConf's loader parsed, by the SHA-256 of the text (see :data:`rlgate.core.io._PARSED`):
#: the functional tier and ``recipe check`` read the same recipe chains dozens of times.
_LOADED: dict[bytes, Any] = {}


def _parse(text: str) -> Any:
    return yaml.load(text, Loader=_OMEGACONF_LOADER)


def _read_raw(path: Path) -> tuple[dict[str, Any], bytes]:
    """The parsed text of one config file (a copy) and the SHA-256 of that text."""
    # One parse: missing/directory/non-UTF-8 files are refused by read_text, alias bombs by
    # the loader's budget before anything is constructed.
    text = read_text(path, what="config file", error=RecipeError)
    key = hashlib.sha256(text.encode("utf-8")).digest()
    try:
        raw = copy.deepcopy(_LOADED[key]) if key in _LOADED else _parse(text)
    except yaml.constructor.ConstructorError as exc:
        raise RecipeError(f"{path}: not a valid NeMo RL config: {yaml_problem(exc)}") from exc
    except (yaml.YAMLError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else yaml_problem(exc)
        raise RecipeError(f"{path}: not valid YAML: {detail}") from exc
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a NeMo RL config must be a mapping, got {type(raw).__name__}")
    if _depth(raw) > MAX_DEPTH:
        raise RecipeError(
            f"{path}: nested more than {MAX_DEPTH} levels deep; not a NeMo RL config",
            hint="NeMo RL configs nest about ten levels",
        )
    if key not in _LOADED:  # only what parsed (an invalid text is refused every time)
        memoise(_LOADED, key, copy.deepcopy(raw), len(text))
    return raw, key


def _create(path: Path, raw: dict[str, Any]) -> DictConfig:
    try:
        return OmegaConf.create(raw)  # keeps interpolations unresolved
    except (OmegaConfBaseException, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise RecipeError(f"{path}: not a valid NeMo RL config: {detail}") from exc


def _load_yaml(path: Path) -> DictConfig:
    """One config file as OmegaConf reads it (``OmegaConf.load``; test_recipes checks)."""
    return _create(path, _read_raw(path)[0])


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


def _parent_paths(path: Path, defaults: Any) -> list[Path]:
    """The files a ``defaults:`` value names (NeMo RL: a path or a list of paths)."""
    entries = [defaults] if isinstance(defaults, str) else defaults
    if not isinstance(entries, ListConfig | list) or not all(isinstance(e, str) for e in entries):
        shown = OmegaConf.to_container(defaults) if OmegaConf.is_config(defaults) else defaults
        raise RecipeError(
            f"{path}: `defaults:` must be a file path or a list of file paths, got {shown!r}",
            hint="e.g. `defaults: ../../grpo_math_1B.yaml` (relative to the file that names it)",
        )
    parents = []
    for entry in entries:
        parent = Path(entry) if Path(entry).is_absolute() else path.parent / entry
        if parent.is_dir():
            raise RecipeError(
                f"{path}: defaults entry {entry!r} is a directory ({parent}), not a config file"
            )
        if not parent.is_file():
            raise RecipeError(
                f"{path}: defaults entry {entry!r} not found (looked for {parent})",
                hint="defaults paths are relative to the file that names them",
            )
        parents.append(parent)
    return parents


@dataclass(frozen=True, slots=True)
class _Chain:
    """A config merged with its ``defaults:`` chain, unresolved, as a plain container."""

    key: bytes | None  # None: not memoised (a ``defaults:`` value OmegaConf must resolve)
    container: dict[str, Any]
    sources: tuple[Path, ...]


#: Merged chains by the SHA-256 of every file's path and text in the chain (the functional
#: tier and ``recipe check`` merge the same chains dozens of times per process, and merging is
#: most of a load). Every file is still read and parsed (memoised) on every load, so a changed
#: file anywhere in the chain is a different key; only chains that merged are kept.
_CHAINS: dict[bytes, _Chain] = {}


def _plain_defaults(defaults: Any) -> bool:
    """A ``defaults:`` value its raw text decides alone: a path or a list of plain paths."""
    entries = [defaults] if isinstance(defaults, str) else defaults
    return isinstance(entries, list) and all(
        isinstance(e, str) and "${" not in e and e != "???" for e in entries
    )


def _chain(path: Path, seen: tuple[Path, ...]) -> _Chain:
    """Follow and merge ``path``'s ``defaults:`` chain (memoised by the chain's texts).

    The errors and their order are those of reading the file, then its ``defaults:``, then
    each parent, depth-first (a cycle is refused wherever it closes).
    """
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise RecipeError(f"circular defaults chain: {chain}")
    raw, digest = _read_raw(path)
    plain = "defaults" in raw and _plain_defaults(raw["defaults"])
    parents: list[_Chain] = []
    if plain:
        try:
            parents = [_chain(p, (*seen, path)) for p in _parent_paths(path, raw["defaults"])]
        except RecipeError:
            _create(path, raw)  # this file's own error first, as without the memo
            raise
    key: bytes | None = None
    if ("defaults" not in raw or plain) and all(p.key is not None for p in parents):
        own = hashlib.sha256(os.fsencode(path) + b"\0" + digest)
        for parent in parents:
            own.update(parent.key or b"")
        key = own.digest()
        if key in _CHAINS:
            return _CHAINS[key]
    cfg = _create(path, raw)
    if "defaults" in cfg:
        defaults = cfg.pop("defaults")
        if not plain:  # resolved by OmegaConf (e.g. an interpolation), as NeMo RL reads it
            key = None
            parents = [_chain(p, (*seen, path)) for p in _parent_paths(path, defaults)]
        base = OmegaConf.create({})
        for parent in parents:
            base = _merge(base, OmegaConf.create(parent.container))
        cfg = _merge(base, cfg)
    container = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(container, dict)
    found = _Chain(key, container, (*(s for p in parents for s in p.sources), path))
    if key is not None:
        memoise(_CHAINS, key, found, 0)
    return found


def _load_chain(path: Path, seen: tuple[Path, ...]) -> tuple[DictConfig, list[Path]]:
    """The config merged with its ``defaults:`` chain (a new ``DictConfig``) and its files."""
    found = _chain(path, seen)
    return OmegaConf.create(found.container), list(found.sources)


def config_files(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """Every file of a config's ``defaults:`` chain, parents first and the config last.

    The files :func:`load_recipe` reads, found without merging anything (each is read with
    :func:`rlgate.core.io.read_yaml`), so a command can keep its outputs off all of them
    before any work. A file that cannot be read, or whose ``defaults:`` cannot be followed,
    ends its branch here: :func:`load_recipe` refuses it with its own message.
    """
    found: list[Path] = []

    def walk(file: Path, seen: tuple[Path, ...]) -> None:
        file = file.resolve()
        if file in seen or file in found:
            return
        try:
            raw = read_yaml(file, what="config file", error=RecipeError)
            defaults = raw.get("defaults") if isinstance(raw, dict) else None
            parents = _parent_paths(file, defaults) if defaults is not None else []
        except RecipeError:
            parents = []
        for parent in parents:
            walk(parent, (*seen, file))
        found.append(file)

    walk(Path(path), ())
    return tuple(found)


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


@contextmanager
def _env_stubbed() -> Iterator[None]:
    """Every ``oc.env`` lookup succeeds (a placeholder) while inside; restored on exit."""
    OmegaConf.register_new_resolver(
        "oc.env", lambda key, default=None: f"<env {key}>", replace=True
    )
    try:
        yield
    finally:
        OmegaConf.register_new_resolver("oc.env", oc_resolvers.env, replace=True)


def _unresolved(cfg: DictConfig, path: str, node: str, exc: Exception) -> Unresolved:
    """Classify a failed interpolation by resolving it again with every env variable set."""
    reason = str(exc).splitlines()[0]
    kind: UnresolvedKind = "env"
    with _env_stubbed():
        try:
            OmegaConf.select(cfg, path, throw_on_resolution_failure=True)
        except InterpolationKeyError as again:
            kind, reason = "missing-key", str(again).splitlines()[0]
        except UnsupportedInterpolationType as again:
            kind, reason = "resolver", str(again).splitlines()[0]
        except InterpolationToMissingValueError as again:
            kind, reason = "missing-value", str(again).splitlines()[0]
        except (OmegaConfBaseException, TypeError, ValueError, ArithmeticError):
            pass  # depends on the variable's value (e.g. arithmetic on it): may resolve there
    return Unresolved(path, node, reason, kind)


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
            except (OmegaConfBaseException, TypeError, ValueError, ArithmeticError) as exc:
                unresolved.append(_unresolved(cfg, path, node, exc))
                return node
            if isinstance(value, DictConfig | ListConfig):
                return OmegaConf.to_container(value, resolve=True)
            return value
        return node

    return resolve_node(raw, ""), unresolved


def load_recipe(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    *,
    strict: bool = True,
    gate: type[GateSpec] = GateSpec,
) -> Recipe:
    """Load a NeMo RL config (with ``defaults:`` chain), apply dotted overrides, validate.

    Args:
        path: the config file.
        overrides: Hydra overrides, applied as NeMo RL applies them.
        strict: an invalid fact (``cluster.num_nodes: two``) is a ``RecipeError``; with
            ``False`` it is left ``None`` in ``Recipe.facts`` for a validator to report.
        gate: the schema of the ``rlgate:`` block (the check registry's, from
            :func:`rlgate.checks.registry.load_recipe`; the generic keys by default).

    Raises:
        RecipeError: the file, a parent or an override cannot be loaded or applied; the
            ``rlgate:`` block is invalid; (strict) a fact rlgate reads is invalid.
    """
    _register_resolvers()
    file = Path(path)
    cfg, sources = _load_chain(file, ())
    cfg = _apply_overrides(cfg, overrides)
    resolved, unresolved = _resolve(cfg)
    raw_gate = resolved.pop(GATE_KEY, None)
    if raw_gate is not None and not isinstance(raw_gate, dict):
        raise RecipeError(f"{file}: the `{GATE_KEY}:` block must be a mapping")
    # List elements are not addressable by OmegaConf.select paths; drop their noise.
    unresolved = [u for u in unresolved if not u.key.startswith(f"{GATE_KEY}.")]
    return Recipe(
        name=file.stem,
        path=file,
        config=resolved,
        gate=parse_gate(raw_gate, recipe=str(file), schema=gate),
        facts=read_facts(resolved, strict=strict, source=str(file)),
        overrides=tuple(overrides),
        sources=tuple(sources),
        unresolved=tuple(unresolved),
    )


# The sections that name the algorithm of NeMo RL's other configs: the base configs of
# ALGO_MAPPING_TO_BASE_YAML (tests/unit/test_recipes_and_test_suites.py @ 7ea279a) are
# sft.yaml (sft:), dpo.yaml (dpo:), rm.yaml (rm:), distillation_math.yaml (distillation:)
# and ppo_math_1B_megatron.yaml (ppo:); every GRPO-family base (grpo, dapo, gdpo, mopd,
# prorlv2, vlm_grpo) has a grpo: section.
OTHER_ALGORITHMS = ("distillation", "dpo", "ppo", "rm", "sft")


def require_grpo(recipe: Recipe) -> None:
    """Refuse a config that is not a GRPO config (no ``grpo:`` section after its defaults).

    Raises:
        RecipeError: naming the other algorithm's section when there is one.
    """
    if isinstance(recipe.config.get("grpo"), dict):
        return
    others = [f"`{k}:`" for k in OTHER_ALGORITHMS if k in recipe.config]
    what = f"has {', '.join(others)}" if others else "no `grpo:` section"
    raise RecipeError(
        f"{recipe.path}: not a GRPO config ({what})",
        hint="rlgate recipe check validates GRPO-family configs (grpo, dapo, gdpo, mopd), "
        "the ones NeMo RL runs with run_grpo*.py",
    )


def recipe_files(root: str | os.PathLike[str]) -> list[Path]:
    """Rlgate's recipes under ``root``: ``*.yaml`` and one level of subfolders, except ``base/``."""
    top = Path(root)
    files = sorted(top.glob("*.yaml")) + sorted(
        p for p in top.glob("*/*.yaml") if p.parent.name != "base"
    )
    return files


def recipe_tiers(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The tiers a recipe file declares in ``rlgate.tiers`` (read without loading its chain)."""
    raw = read_yaml(path, what="recipe", error=RecipeError) or {}
    gate = raw.get(GATE_KEY) if isinstance(raw, dict) else None
    tiers = gate.get("tiers") if isinstance(gate, dict) else None
    if tiers is None:
        return TIERS
    if not isinstance(tiers, list) or not all(isinstance(t, str) for t in tiers):
        raise RecipeError(f"{path}: rlgate.tiers must be a list of tier names, got {tiers!r}")
    unknown = sorted(set(tiers) - set(TIERS))
    if unknown:
        raise RecipeError(f"{path}: rlgate.tiers has unknown tier(s) {unknown}; known: {TIERS}")
    return tuple(tiers)


def get_path(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """Return ``config[a][b][c]`` for ``"a.b.c"``, or ``default`` when any level is absent.

    For validators that must see a raw value as written (``recipe check``'s rules): commands
    read ``Recipe.facts``. ``config`` is the resolved plain dict, where ``???`` and
    interpolations that did not resolve are kept as text; ``OmegaConf.select`` over it would
    read them as MISSING or try to resolve them again.
    """
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return every key path of ``config`` (mappings descended, lists kept as leaves)."""
    return dict(_walk(config))


def functional_gate(recipe: Recipe) -> FunctionalGate:
    """The recipe's ``rlgate.functional`` block (validated at load)."""
    return recipe.gate.functional
