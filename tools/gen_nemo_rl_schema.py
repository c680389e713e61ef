"""Generate rlgate's NeMo RL GRPO config-key schema from an extracted NeMo RL checkout.

All static: the checkout and the libraries are parsed with ``ast``, never imported.

1. Declared keys come from the TypedDict/BaseModel classes reachable from the GRPO
   ``MasterConfig`` roots (NotRequired, nested classes, inheritance, backend subclasses).
   Each records its ``type`` from the annotation, ``enum`` for a ``Literal``, ``bounds`` for
   pydantic constraints (``PositiveInt``, ``Field(gt=...)``) and for the ranges NeMo RL asserts
   (RANGES, each citing file and function), and ``validated`` when ``MasterConfig(**config)``
   type-checks it at start (the annotated classes, not their subclasses).
2. Undeclared keys are the paths that the published GRPO-family example YAMLs set (and the
   ``policy:`` sections of the other published configs, which share PolicyConfig). Each gets
   ``"declared": false``, the first file as ``where`` and a ``seen_in`` count.
3. Keys that code reads: ``cfg["a"]["b"]``, ``cfg.get("b")``, ``"b" in cfg``,
   ``cfg.pop/setdefault("b")`` everywhere under ``nemo_rl/``, following local assignments and
   ``self.x = config`` attributes back to a parameter. A read rooted at a parameter annotated
   with a schema class is attributed exactly (``"via": "code"``). A read rooted at an
   unannotated ``config``/``cfg``-named variable is approximate (``"via": "code-approx"``): its
   leaf is added under the prefixes of the reading package's schema classes where the rest of
   the chain already exists; a single-key read from such a root is not placed.
4. Subtrees handed whole to a library as ``**kwargs`` are closed: by the fields of the
   library's dataclass (LIBRARY_SUBTREES: Megatron Bridge/Core ``OptimizerConfig`` and
   ``SchedulerConfig`` from their wheels given with ``--library``, vLLM's ``AsyncEngineArgs``
   from the installed package; versions in ``source.libraries``), else by the keys the
   published configs set (``closed.<prefix>.by == "examples"``). Only the FREE_FORM subtrees
   stay ``open``, each with its one-line reason in ``open_why``.
5. A key counts as read if any of these holds:
   - the exact code-read scan found it;
   - its leaf is a string literal or attribute in a ``nemo_rl/`` or ``examples/**/*.py`` file
     that also mentions the parent key or a schema class for it;
   - it lies in an open or closed subtree, consumed as ``**kwargs``;
   - a ``${...}`` interpolation in the YAMLs references it.
   MANUAL_UNREAD overrides these with hand-checked evidence. Unread keys carry ``evidence``.

Paths are dotted. ``[]`` marks list elements and ``*`` matches one path component. The
``gym`` prefixes hold NeMo Gym server configs, which are validated against nemo-gym's models.

Regenerate (NeMo RL 7ea279a; megatron wheels downloaded, not installed)::

    git -C <nemo-rl mirror> archive <commit> | tar -x -C /tmp/nemo-rl
    pip download megatron-core==0.19.2 megatron-bridge==0.6.2 --no-deps --only-binary=:all: \
        --python-version 3.12 --platform manylinux_2_28_x86_64 -d /tmp/mlibs
    python tools/gen_nemo_rl_schema.py --nemo-rl /tmp/nemo-rl --commit <sha> \
        --library /tmp/mlibs/megatron_core-*.whl --library /tmp/mlibs/megatron_bridge-*.whl \
        --out src/rlgate/data/nemo_rl_schema.json
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Ref = tuple[str, str]  # (module, class name)
TypeInfo = tuple[set[str], list[Ref], list[Ref], bool]  # types, classes, list-item classes, open

ROOTS: list[Ref] = [  # run_grpo*.py / run_grpo_nemo_gym.py, and the single-controller runner
    ("nemo_rl.algorithms.grpo", "MasterConfig"),
    ("nemo_rl.algorithms.single_controller_utils.config", "MasterConfig"),
]
# Validated at runtime for backend=dynamo, but not typed into PolicyConfig.
EXTRA_BINDINGS = {
    "policy.generation": [("nemo_rl.models.generation.dynamo.config", "DynamoConfig")]
}
# Consumed wholesale where scan_splats cannot see it: PeftConfig.from_dict({**lora_cfg, ...}).
PASSTHROUGH = {"policy.dtensor_cfg.lora_cfg"}
# merged_inference_megatron_cfg (models/generation/megatron/config.py) lays it over megatron_cfg.
PARENT_ALIASES = {"policy.generation.mcore_generation_config": ("megatron_cfg",)}
GYM_PREFIX = "env.nemo_gym"
# env is dict[str, Any]. These are the env keys that NeMo RL itself reads (checked by hand);
# the where paths are relative to nemo_rl/ unless they start with examples/.
_ENV_TABLE = """
env.should_use_nemo_gym                 bool      environments/nemo_gym.py:should_use_nemo_gym
env.should_log_nemo_gym_responses       bool      algorithms/grpo.py:_should_log_nemo_gym_responses
env.should_mask_flagged_samples         bool      experience/rollouts.py:should_mask_flagged_samples
env.nemo_gym                            dict      environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.invalid_tool_call_patterns list|null environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.thinking_tags              list|null environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.tokenizer_config           dict|null environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.pad_dynamic_image_shapes   bool      environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.num_gpu_nodes              int       environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.uv_venv_dir                str       environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.uv_cache_dir               str       environments/nemo_gym.py:spinup_nemo_gym_actor
env.nemo_gym.is_trajectory_collection   bool      examples/nemo_gym/run_grpo_nemo_gym.py:main
env.nemo_gym.effort_levels              dict|null algorithms/grpo.py:_get_effort_config
env.nemo_gym.port_range_low             int       environments/nemo_gym.py:NemoGym._spinup
env.nemo_gym.port_range_high            int       environments/nemo_gym.py:NemoGym._spinup
"""
ENV_KEYS = {
    path: (type_, where if where.startswith("examples/") else f"nemo_rl/{where}")
    for path, type_, where in (line.split() for line in _ENV_TABLE.strip().splitlines())
}
ENV_CLASSES = {"env.nemo_gym.effort_levels": ("nemo_rl.experience.rollouts", "EffortLevelsConfig")}
# Keys that the heuristic calls read but that have no effect (checked by hand).
MANUAL_UNREAD = {
    "policy.generation.vllm_cfg.distributed_executor_backend": (
        "set in NeMo RL's distillation configs, but vllm_worker.py:_load_model computes "
        "vllm_kwargs['distributed_executor_backend'] itself with "
        "resolve_distributed_executor_backend(tp, pp, ep) and never reads vllm_cfg's"
    )
} | {
    f"env.nemo_gym.port_range_{end}": (
        f"NemoGym._spinup overwrites initial_global_config_dict['port_range_{end}'] with "
        f"NemoGymConfig.port_range_{end}, which spinup_nemo_gym_actor never sets from "
        f"env.nemo_gym, so DEFAULT_GYM_PORT_RANGE_{end.upper()} always wins"
    )
    for end in ("low", "high")
}
YAML_GLOBS = (
    "examples/configs/*.yaml",
    "examples/configs/recipes/llm/grpo*.yaml",
    "examples/nemo_gym/**/*.yaml",
    "examples/swe_bench/*.yaml",
)
# Every published config whose `policy:` section is scanned as well (the same PolicyConfig).
SHARED_GLOBS = ("examples/configs/**/*.yaml", "examples/nemo_gym/**/*.yaml")
# As in NeMo RL's tests/unit/test_config_validation.py, these pick a non-GRPO MasterConfig.
OTHER_ALGOS = {"teachers", "distillation", "dpo", "sft"}
SCALARS = {"bool": "bool", "str": "str", "bytes": "str", "Path": "str"}
SCALARS |= dict.fromkeys(("int", "PositiveInt", "NonNegativeInt"), "int")
SCALARS |= dict.fromkeys(("float", "PositiveFloat"), "float")
WRAPPERS = {"NotRequired", "Required", "ReadOnly", "Annotated", "Final"}
# pydantic's constrained scalar types and the bound each enforces.
CONSTRAINED: dict[str, dict[str, float]] = {
    "PositiveInt": {"gt": 0},
    "PositiveFloat": {"gt": 0},
    "NonNegativeInt": {"ge": 0},
    "NonNegativeFloat": {"ge": 0},
    "NegativeInt": {"lt": 0},
    "NegativeFloat": {"lt": 0},
}
LISTS = {"list", "List", "Sequence", "tuple", "Tuple", "set", "frozenset"}
DICTS = {"dict", "Dict", "Mapping", "MutableMapping"}


def _scalar_core(expr: ast.expr) -> str | None:
    """The scalar type name under NotRequired/Optional/Annotated wrappers (None for containers)."""
    for _ in range(8):
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            expr = ast.parse(expr.value, mode="eval").body
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            sides = [e for e in (expr.left, expr.right) if ast.unparse(e) != "None"]
            if len(sides) != 1:
                return None
            expr = sides[0]
        elif isinstance(expr, ast.Subscript):
            name = ast.unparse(expr.value).rpartition(".")[2]
            args = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            if name in WRAPPERS or name == "Optional":
                expr = args[0]
            elif (
                name == "Union" and len(rest := [a for a in args if ast.unparse(a) != "None"]) == 1
            ):
                expr = rest[0]
            else:
                return None
        else:
            return ast.unparse(expr).rpartition(".")[2]
    return None


def _annotated_metadata(expr: ast.expr) -> list[ast.expr]:
    """The metadata of ``Annotated[T, ...]`` found under NotRequired/Optional wrappers."""
    out: list[ast.expr] = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Annotated"):
            if isinstance(node.slice, ast.Tuple):
                out += node.slice.elts[1:]
    return out


def py_files(root: Path, *dirs: str) -> list[Path]:
    """Return the sorted .py files under ``root/<dir>`` for each dir."""
    return [p for d in dirs for p in sorted((root / d).rglob("*.py"))]


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those under ``if``/``try`` (optional imports)."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try)):
            yield from _top_level(node.body)
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
        else:
            yield node


class Index:
    """The classes under ``nemo_rl/``, with import-aware name resolution."""

    def __init__(self, root: Path) -> None:
        self.paths: dict[str, str] = {}
        self.classes: dict[str, dict[str, ast.ClassDef]] = {}
        self.aliases: dict[str, dict[str, ast.expr]] = {}
        self.imports: dict[str, dict[str, tuple[str, str]]] = {}
        for path in py_files(root, "nemo_rl"):
            rel = path.relative_to(root)
            self._parse(path, ".".join(rel.with_suffix("").parts), str(rel))
        self.by_name: dict[str, list[Ref]] = {}
        for mod, classes in self.classes.items():
            for name in classes:
                self.by_name.setdefault(name, []).append((mod, name))
        self.subclasses: dict[Ref, list[Ref]] = {}
        for mod, classes in self.classes.items():
            for name, node in classes.items():
                for base in node.bases:
                    target = self.resolve(mod, ast.unparse(base))
                    if isinstance(target, tuple) and self.kind((mod, name)):
                        self.subclasses.setdefault(target, []).append((mod, name))

    def _parse(self, path: Path, dotted: str, rel: str) -> None:
        mod = dotted.removesuffix(".__init__")
        package = mod if dotted.endswith("__init__") else mod.rpartition(".")[0]
        self.paths[mod], classes, aliases, imports = rel, {}, {}, {}
        for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                aliases[node.targets[0].id] = node.value
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")[: len(package.split(".")) + 1 - node.level]
                base = (
                    ".".join([*parts, node.module or ""]).strip(".") if node.level else node.module
                )
                for alias in node.names:
                    imports[alias.asname or alias.name] = (base or "", alias.name)
        self.classes[mod], self.aliases[mod], self.imports[mod] = classes, aliases, imports

    def resolve(self, mod: str, name: str, depth: int = 0) -> Ref | ast.expr | None:
        """Resolve ``name`` as seen from ``mod`` to a class, an alias expression, or None."""
        if mod not in self.classes or depth > 8:
            return None
        if name in self.classes[mod]:
            return (mod, name)
        if name in self.aliases[mod]:
            return self.aliases[mod][name]
        if name in self.imports[mod]:
            return self.resolve(*self.imports[mod][name], depth + 1)
        refs = self.by_name.get(name, [])  # dotted or star-imported names: unique match only
        return refs[0] if len(refs) == 1 else None

    def kind(self, ref: Ref, depth: int = 0) -> str | None:
        """Return "TypedDict", "BaseModel" or None for a class, following its bases."""
        for base in self.classes[ref[0]][ref[1]].bases:
            name = ast.unparse(base)
            if name.rpartition(".")[2] in ("TypedDict", "BaseModel"):
                return name.rpartition(".")[2]
            target = self.resolve(ref[0], name)
            if isinstance(target, tuple) and depth < 8 and (found := self.kind(target, depth + 1)):
                return found
        return None

    def fields(self, ref: Ref) -> dict[str, tuple[ast.expr, Ref, ast.expr | None]]:
        """Return ``{key: (annotation, defining class, default)}``, inherited fields first."""
        out: dict[str, tuple[ast.expr, Ref, ast.expr | None]] = {}
        node = self.classes[ref[0]][ref[1]]
        for base in node.bases:
            target = self.resolve(ref[0], ast.unparse(base))
            if isinstance(target, tuple) and self.kind(target):
                out.update(self.fields(target))
        private = self.kind(ref) == "BaseModel"  # pydantic: _x are private attributes
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                key = stmt.target.id
                if "ClassVar" in ast.unparse(stmt.annotation) or key == "model_config":
                    continue
                if not (private and key.startswith("_")):
                    out[key] = (stmt.annotation, ref, stmt.value)
        return out

    def literals(self, expr: ast.expr, mod: str, depth: int = 0) -> list[Any] | None:
        """The allowed values when every non-null member of ``expr`` is a ``Literal``."""
        name = ast.unparse(expr.value if isinstance(expr, ast.Subscript) else expr)
        name = name.rpartition(".")[2]
        args: list[ast.expr] = []
        if isinstance(expr, ast.Subscript):
            args = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        parts: list[ast.expr]
        if depth > 8:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            parts = [ast.parse(expr.value, mode="eval").body]
        elif isinstance(expr, ast.Constant) and expr.value is None:
            return [None]
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            parts = [expr.left, expr.right]
        elif isinstance(expr, ast.Subscript) and name in WRAPPERS:
            parts = args[:1]
        elif isinstance(expr, ast.Subscript) and name in ("Optional", "Union"):
            parts = [*args, ast.Constant(None)] if name == "Optional" else args
        elif isinstance(expr, ast.Subscript) and name == "Literal":
            values = [a.value for a in args if isinstance(a, ast.Constant)]
            return values if len(values) == len(args) else None
        elif isinstance(expr, (ast.Name, ast.Attribute)) and isinstance(
            target := self.resolve(mod, name), ast.expr
        ):
            parts = [target]
        else:
            return None
        out: list[Any] = []
        for part in parts:
            values = self.literals(part, mod, depth + 1)
            if values is None:
                return None
            out += [v for v in values if v not in out]
        return out

    def bounds(self, expr: ast.expr, default: ast.expr | None) -> dict[str, float]:
        """Bounds pydantic enforces on a scalar field (``PositiveInt``, ``Field(gt=...)``)."""
        found: dict[str, float] = {}
        for call in (default, *_annotated_metadata(expr)):
            if isinstance(call, ast.Call) and ast.unparse(call.func).endswith("Field"):
                for kw in call.keywords:
                    if kw.arg in ("gt", "ge", "lt", "le") and isinstance(kw.value, ast.Constant):
                        found[kw.arg] = kw.value.value
        scalar = _scalar_core(expr)
        if scalar is not None:
            found |= CONSTRAINED.get(scalar, {})
        return found

    def analyze(self, expr: ast.expr, mod: str, depth: int = 0) -> TypeInfo:
        """Classify a type annotation as (types, classes, list-item classes, open)."""
        types: set[str] = set()
        classes: list[Ref] = []
        items: list[Ref] = []
        subs: list[ast.expr] = []  # union members, merged below
        is_open = False
        name = ast.unparse(expr.value if isinstance(expr, ast.Subscript) else expr)
        name = name.rpartition(".")[2]
        args = []
        if isinstance(expr, ast.Subscript):
            args = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        target = self.resolve(mod, name) if isinstance(expr, (ast.Name, ast.Attribute)) else None
        if depth > 12:
            types.add("any")
        elif isinstance(expr, ast.Constant) and isinstance(expr.value, str):  # forward reference
            subs = [ast.parse(expr.value, mode="eval").body]
        elif isinstance(expr, ast.Constant):
            types.add("null" if expr.value is None else "any")
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            subs = [expr.left, expr.right]
        elif isinstance(expr, ast.Subscript) and name in WRAPPERS:
            subs = args[:1]
        elif isinstance(expr, ast.Subscript) and name in ("Optional", "Union"):
            subs, types = args, {"null"} if name == "Optional" else set()
        elif isinstance(expr, ast.Subscript) and name == "Literal":
            types = {
                "null" if a.value is None else SCALARS.get(type(a.value).__name__, "any")
                for a in args
                if isinstance(a, ast.Constant)
            }
        elif name in LISTS:
            types.add("list")
            items = [c for a in args for c in self.analyze(a, mod, depth + 1)[1]]
        elif name in DICTS or name in ("Any", "object"):
            types, is_open = {"dict" if name in DICTS else "any"}, True
        elif name in SCALARS and not args:
            types.add(SCALARS[name])
        elif isinstance(target, tuple) and self.kind(target):
            types, classes = {"dict"}, [target]
        elif isinstance(target, ast.expr):
            subs = [target]
        else:  # Callable, torch.dtype, other third-party types
            types.add("any")
        for sub in subs:
            sub_types, sub_classes, sub_items, sub_open = self.analyze(sub, mod, depth + 1)
            types |= sub_types
            classes += [c for c in sub_classes if c not in classes]
            items += [c for c in sub_items if c not in items]
            is_open |= sub_open
        return types, classes, items, is_open

    def expand(self, refs: list[Ref]) -> list[Ref]:
        """Return ``refs`` plus all their schema subclasses (backend variants), breadth first."""
        out: list[Ref] = []
        for ref in (queue := list(refs)):
            if ref not in out:
                out.append(ref)
                queue += self.subclasses.get(ref, [])
        return out


def walk_schema(
    index: Index, splats: set[tuple[str, ...]]
) -> tuple[dict[str, Any], set[str], dict[str, set[str]]]:
    """Walk the schema classes from ``ROOTS``.

    Returns:
        Declared keys, open prefixes, and the schema class names that define each prefix.
    """
    keys: dict[str, dict[str, Any]] = {}
    open_prefixes = set(PASSTHROUGH)
    context: dict[str, set[str]] = {}

    def visit(prefix: str, refs: list[Ref], seen: frozenset[Ref], validated: bool) -> None:
        # pydantic validates the annotated classes only, not subclasses or extra bindings.
        checked = set(refs) if validated else set()
        refs = index.expand(refs) + EXTRA_BINDINGS.get(prefix, [])
        refs = [r for r in refs if r[1] in index.classes.get(r[0], {})]  # absent in a tiny tree
        context.setdefault(prefix, set()).update(name for _, name in refs)
        for ref in (r for r in refs if r not in seen):
            for key, (ann, owner, default) in index.fields(ref).items():
                path = f"{prefix}.{key}" if prefix else key
                types, classes, items, is_open = index.analyze(ann, owner[0])
                where = f"{index.paths[owner[0]]}:{owner[1]}"
                entry = keys.setdefault(path, {"type": set(), "declared": True, "where": where})
                entry["type"] |= types
                entry.setdefault("_enum", []).append(index.literals(ann, owner[0]))
                bounds = index.bounds(ann, default)
                entry.setdefault("_bounds", []).append((bounds, where) if bounds else None)
                entry["_validated"] = entry.get("_validated", False) or ref in checked
                if is_open:
                    open_prefixes.add(path)
                if classes:
                    visit(path, classes, seen | {ref}, ref in checked)
                if items:
                    visit(f"{path}[]", items, seen | {ref}, ref in checked)

    for root in ROOTS:  # examples/run_grpo*.py: MasterConfig(**config)
        visit("", [root], frozenset(), True)
    for path, (type_, where) in ENV_KEYS.items():
        keys.setdefault(path, {"type": set(type_.split("|")), "declared": True, "where": where})
    for path, ref in ENV_CLASSES.items():
        visit(path, [ref], frozenset(), False)
    where = "nemo_rl/algorithms/grpo.py:MasterConfig (env: dict[str, Any])"
    keys["env.*"] = {"type": {"dict"}, "declared": True, "where": where}
    open_prefixes = (open_prefixes - {"env"}) | {"env.*"}
    for chain in splats:  # a subtree handed to a callee as **kwargs is consumed wholesale
        if chain[0].startswith("@"):
            found = [
                ".".join(filter(None, [p, *chain[1:]]))
                for p, names in context.items()
                if chain[0][1:] in names
            ]
        else:
            found = [
                k for k in keys if tuple(k.replace("[]", "").split("."))[-len(chain) :] == chain
            ]
        open_prefixes |= {
            k for k in found if k in context or "dict" in keys.get(k, {"type": ""})["type"]
        }
    for entry in keys.values():
        entry["type"] = "|".join(sorted(entry["type"]))
        _merge_variants(entry)
    return keys, open_prefixes, context


def _merge_variants(entry: dict[str, Any]) -> None:
    """Keep an enum or a bound only when every schema class declaring the key agrees.

    ``validated`` marks keys that ``MasterConfig(**config)`` type-checks at NeMo RL's start.
    """
    if entry.pop("_validated", False):
        entry["validated"] = True
    enums = entry.pop("_enum", [])
    if enums and all(e is not None for e in enums):
        values = [v for e in enums for v in e]
        entry["enum"] = sorted(dict.fromkeys(v for v in values if v is not None), key=repr)
    bounds = entry.pop("_bounds", [])
    if bounds and all(b is not None and b[0] == bounds[0][0] for b in bounds):
        constraint, where = bounds[0]
        names = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
        text = " and ".join(f"{names[k]} {v}" for k, v in sorted(constraint.items()))
        entry["bounds"] = {**constraint, "why": f"pydantic constraint ({text}) in {where}"}


# ---------------------------------------------------------------------------------------------
# Subtrees handed whole to a library (``**kwargs``): closed with the library's own field set.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibClass:
    """A dataclass of a third-party package whose fields are the keys of a config subtree."""

    dist: str  # distribution name, as pip spells it
    module: str
    cls: str
    consumer: str  # where NeMo RL hands the subtree over, file:function: call


LIBRARY_SUBTREES: dict[str, LibClass] = {
    "policy.megatron_cfg.optimizer": LibClass(
        "megatron-bridge",
        "megatron.bridge.training.config",
        "OptimizerConfig",
        "nemo_rl/models/megatron/setup.py:_create_megatron_config: "
        "OptimizerConfig(**{**megatron_cfg.optimizer, ...})",
    ),
    "policy.megatron_cfg.scheduler": LibClass(
        "megatron-bridge",
        "megatron.bridge.training.config",
        "SchedulerConfig",
        "nemo_rl/models/megatron/setup.py:_create_megatron_config: "
        "SchedulerConfig(**megatron_cfg.scheduler)",
    ),
    "policy.generation.vllm_kwargs": LibClass(
        "vllm",
        "vllm.engine.arg_utils",
        "AsyncEngineArgs",
        "nemo_rl/models/generation/vllm/vllm_worker.py:_load_model: "
        "llm_kwargs = dict(..., **vllm_kwargs), then vllm.LLM(**llm_kwargs) or "
        "AsyncEngineArgs(**llm_kwargs) (vllm_worker_async.py:_create_engine)",
    ),
}
# Open subtrees whose keys are genuinely free-form (matched like schema paths, ``*`` = one
# component). Every other open subtree is closed: by its library's fields (LIBRARY_SUBTREES)
# when that library is given, else by the keys NeMo RL's published configs set there.
FREE_FORM: dict[str, str] = {
    "env.*": "environment configs: env is dict[str, Any]; each environment class reads its own",
    "data.default": "dataset kwargs: read by the dataset class that data.*.dataset_name selects",
    "data.train": "dataset kwargs: read by the dataset class that dataset_name selects",
    "data.train[]": "dataset kwargs: read by the dataset class that dataset_name selects",
    "data.validation": "dataset kwargs: read by the dataset class that dataset_name selects",
    "data.validation[]": "dataset kwargs: read by the dataset class that dataset_name selects",
    "policy.dtensor_cfg.env_vars": "environment variable names",
    "policy.megatron_cfg.env_vars": "environment variable names",
    "policy.generation.vllm_cfg.env_vars": "environment variable names",
    "policy.tokenizer.chat_template_kwargs": "variables of the model's own Jinja chat template",
    "policy.generation.trtllm_cfg.default_chat_template_kwargs": "chat template variables",
    "policy.generation.vllm_cfg.http_server_serving_chat_kwargs": (
        "vLLM OpenAIServingChat constructor arguments (a class, not a dataclass, and NeMo RL "
        "renames/pops some of them first: vllm_worker_async.py:_setup_vllm_openai_api_server)"
    ),
    "policy.hf_config_overrides": "attributes of the model's own Hugging Face config class",
    "policy.megatron_cfg.model_overrides": (
        "fields of the model-specific Megatron Bridge provider (differs per architecture)"
    ),
    "policy.megatron_cfg.freeze_config": "kwargs of the model's own freeze() (model-specific)",
    "policy.optimizer.kwargs": "kwargs of the torch optimizer class named by policy.optimizer.name",
    "policy.scheduler": "torch LR scheduler(s) named by name; kwargs belong to that class",
    "policy.scheduler[].kwargs": "kwargs of the torch LR scheduler class named by name",
    "policy.generation.refit_cfg.nixl.backend_init_params": "NIXL backend-specific parameters",
    "policy.generation.refit_cfg.sparse.delta_compression.export_chunk_bytes": (
        "map keyed by refit transport name (dict[str, PositiveInt])"
    ),
    "policy.generation.refit_cfg.sparse.delta_compression.zstd_threads": (
        "map keyed by refit transport name (dict[str, NonNegativeInt])"
    ),
    "policy.generation.refit_cfg.sparse.tuning.encode_workers": "map keyed by transport name",
    "policy.generation.refit_cfg.sparse.tuning.transfer_workers": "map keyed by transport name",
    "policy.tokenizer.audio": "processor kwargs of the model's own audio processor",
    "policy.tokenizer.video": "processor kwargs of the model's own video processor",
    "policy.generation.vllm_cfg.video": "VllmVideoConfig (extra=forbid) validates it itself",
    "on_policy_distillation.*": "teacher definitions keyed by teacher name",
    "on_policy_distillation.non_colocated_teachers.*": "teacher definitions and overrides",
    "on_policy_distillation.teacher_model_by_agent_name": "map keyed by agent name",
}
# Where NeMo RL asserts a range on a value (cited); pydantic bounds are read from the classes.
RANGES: dict[str, dict[str, Any]] = {
    "cluster.num_nodes": {
        "ge": 1,
        "why": "nemo_rl/algorithms/grpo.py:setup asserts policy_nodes > 0 (policy_nodes is "
        "cluster.num_nodes minus reward-model nodes)",
    },
    "cluster.gpus_per_node": {
        "ge": 1,
        "why": "nemo_rl/distributed/virtual_cluster.py:RayVirtualCluster.__init__ asserts "
        "num_gpus_per_node > 0 ('num_gpus_per_node must be greater than 0 if using GPUs'), "
        "and grpo.py:setup asserts the training share of cluster.gpus_per_node is > 0",
    },
    "grpo.val_num_generations_per_prompt": {
        "ge": 1,
        "why": "nemo_rl/algorithms/grpo.py:setup asserts "
        "'grpo.val_num_generations_per_prompt must be >= 1'",
    },
}


class LibIndex(Index):
    """Classes of installed or unpacked third-party packages, parsed lazily on demand."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots, self.missing = list(roots), set()
        self.paths, self.classes, self.aliases, self.imports = {}, {}, {}, {}
        self.by_name, self.subclasses = {}, {}

    def _ensure(self, mod: str) -> None:
        if mod in self.classes or mod in self.missing:
            return
        for root in self.roots:
            base = root.joinpath(*mod.split("."))
            candidates = ((base.with_suffix(".py"), mod), (base / "__init__.py", f"{mod}.__init__"))
            for path, dotted in candidates:
                if path.is_file():
                    self._parse(path, dotted, str(path.relative_to(root)))
                    return
        self.missing.add(mod)

    def resolve(self, mod: str, name: str, depth: int = 0) -> Ref | ast.expr | None:
        """Resolve ``name`` as seen from ``mod``, loading modules as needed."""
        self._ensure(mod)
        if "." in name and name.partition(".")[0] in self.imports.get(mod, {}):
            head, _, tail = name.partition(".")  # `module.Class` after `from pkg import module`
            base, sub = self.imports[mod][head]
            return self.resolve(f"{base}.{sub}", tail, depth + 1)
        return super().resolve(mod, name, depth) if mod in self.classes else None

    def kind(self, ref: Ref, depth: int = 0) -> str | None:
        """Also recognise ``@dataclass`` classes."""
        node = self.classes[ref[0]][ref[1]]
        if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            return "dataclass"
        return super().kind(ref, depth)

    def init_fields(self, ref: Ref, depth: int = 0) -> dict[str, tuple[ast.expr, Ref, bool]]:
        """``{field: (annotation, owner, default is None)}`` that __init__ accepts."""
        out: dict[str, tuple[ast.expr, Ref, bool]] = {}
        node = self.classes[ref[0]][ref[1]]
        for base in node.bases:
            target = self.resolve(ref[0], ast.unparse(base))
            if isinstance(target, tuple) and depth < 12:
                out.update(self.init_fields(target, depth + 1))
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            value, name = stmt.value, stmt.target.id
            keywords = value.keywords if isinstance(value, ast.Call) else []
            if any(k.arg == "init" and ast.unparse(k.value) == "False" for k in keywords):
                out.pop(name, None)
                continue
            none = ast.unparse(value) == "None" if value is not None else False
            none |= any(k.arg == "default" and ast.unparse(k.value) == "None" for k in keywords)
            out[name] = (stmt.annotation, ref, none)
        return out


def _dist_name(meta: Path) -> str:
    """Distribution name of a ``<name>-<version>.dist-info/METADATA`` file."""
    return meta.parent.name.removesuffix(".dist-info").rpartition("-")[0]


def _dist_version(root: Path, dist: str) -> str | None:
    """Version of ``dist`` from the ``*.dist-info/METADATA`` under ``root``."""
    norm = re.sub(r"[-_.]+", "_", dist).lower()
    for meta in root.glob("*.dist-info/METADATA"):
        if re.sub(r"[-_.]+", "_", _dist_name(meta)).lower() == norm:
            match = re.search(r"^Version: (\S+)", meta.read_text(encoding="utf-8"), re.M)
            return match.group(1) if match else None
    return None


def library_roots(
    paths: Sequence[Path], work: Path, installed: bool = False
) -> dict[str, tuple[Path, str]]:
    """Map distribution name -> (source root, version) for the given wheels or folders.

    Wheels are unpacked into ``work``. With ``installed``, distributions named in
    LIBRARY_SUBTREES and not given are looked up among the installed ones (read as source
    files, never imported).
    """
    roots: dict[str, tuple[Path, str]] = {}
    for path in paths:
        if path.suffix == ".whl":
            target = work / path.stem
            with zipfile.ZipFile(path) as wheel:
                wheel.extractall(target)
            path = target
        for meta in path.glob("*.dist-info/METADATA"):
            dist = _dist_name(meta).replace("_", "-").lower()
            if version := _dist_version(path, dist):
                roots[dist] = (path, version)
    for spec in LIBRARY_SUBTREES.values() if installed else ():
        if spec.dist in roots:
            continue
        try:
            dist = importlib.metadata.distribution(spec.dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        roots[spec.dist] = (Path(str(dist.locate_file(""))), dist.version)
    return roots


def library_keys(
    roots: dict[str, tuple[Path, str]], wanted: set[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]], set[str], dict[str, str]]:
    """Keys of the LIBRARY_SUBTREES in ``wanted`` (subtrees NeMo RL passes whole) whose
    library is available.

    Returns:
        Keys, the closed subtrees with their source, open prefixes below them (fields typed
        as nested objects or dicts), and the library versions used.
    """
    keys: dict[str, dict[str, Any]] = {}
    closed: dict[str, dict[str, str]] = {}
    below: set[str] = set()
    versions: dict[str, str] = {}
    # megatron-bridge imports megatron.core: one namespace over every given root.
    all_roots = [root for root, _ in roots.values()]
    for prefix, spec in LIBRARY_SUBTREES.items():
        if spec.dist not in roots or prefix not in wanted:
            continue
        root, version = roots[spec.dist]
        index = LibIndex([root, *all_roots])
        ref = index.resolve(spec.module, spec.cls)
        if not isinstance(ref, tuple):
            raise SystemExit(f"error: {spec.module}.{spec.cls} not found in {spec.dist} {version}")
        for name, (ann, owner, none) in index.init_fields(ref).items():
            types, _, _, is_open = index.analyze(ann, owner[0])
            types |= {"null"} if none else set()
            where = f"{_owner_dist(owner[0], roots)} {index.paths[owner[0]]}:{owner[1]}"
            entry: dict[str, Any] = {
                "type": "|".join(sorted(types)),
                "declared": True,
                "read": True,
                "where": where,
            }
            if (enum := index.literals(ann, owner[0])) is not None:
                entry["enum"] = sorted({v for v in enum if v is not None}, key=repr)
            keys[f"{prefix}.{name}"] = entry
            if is_open or types & {"dict", "any"}:
                below.add(f"{prefix}.{name}")
        source = f"{spec.dist} {version}: {index.paths[ref[0]]}:{ref[1]}"
        closed[prefix] = {"by": "library", "source": source, "consumer": spec.consumer}
        versions[spec.dist] = version
    for entry in keys.values():  # megatron-bridge's classes extend megatron-core's
        dist, version = entry["where"].split(" ")[:2]
        if dist != "?":
            versions[dist] = version
    return keys, closed, below, versions


def _owner_dist(module: str, roots: dict[str, tuple[Path, str]]) -> str:
    """``name version`` of the distribution whose root holds ``module``."""
    parts = module.split(".")
    for dist, (root, version) in roots.items():
        base = root.joinpath(*parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return f"{dist} {version}"
    return "?"


# ---------------------------------------------------------------------------------------------
# Keys that code reads: cfg["a"]["b"], cfg.get("b"), "b" in cfg, cfg.pop/setdefault("b").
# ---------------------------------------------------------------------------------------------

# A variable, parameter or self attribute with such a name holds a config (sub)tree.
CONFIG_NAME = re.compile(r"(^|_)(cfg|config|conf)$")
TRANSPARENT = {"dict", "cast", "deepcopy", "copy", "copy.deepcopy", "copy.copy", "Mapping"}
Root = str  # "@Class" (a parameter annotated with schema class Class) or "?" (unknown)


@dataclass
class Scope:
    """What a function body knows: local assignments, config parameters, self attributes."""

    env: dict[str, list[ast.expr]]
    params: dict[str, Root]
    attrs: dict[str, list[tuple[ast.expr, Scope]]]


def _annotation_classes(node: ast.expr | None, schema_classes: set[str]) -> list[str]:
    """Schema class names mentioned in an annotation (string forward references too)."""
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return []
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return sorted(names & schema_classes)


def _scope(fn: ast.FunctionDef | ast.AsyncFunctionDef, schema_classes: set[str]) -> Scope:
    env: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    env.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            if isinstance(node.target, ast.Name):
                env.setdefault(node.target.id, []).append(node.value)
    params: dict[str, Root] = {}
    args = fn.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        classes = _annotation_classes(arg.annotation, schema_classes)
        if classes:
            params[arg.arg] = f"@{classes[0]}"
        elif CONFIG_NAME.search(arg.arg):
            params[arg.arg] = "?"
    return Scope(env, params, {})


def _chains(expr: ast.expr, scope: Scope, depth: int = 0) -> list[tuple[Root, list[str]]]:
    """The (root, keys) a config read expression can stand for (following locals)."""
    keys: list[str] = []
    out: list[tuple[Root, list[str]]] = []
    while depth < 24:
        depth += 1
        call = expr if isinstance(expr, ast.Call) else None
        func = ast.unparse(call.func) if call else ""
        if isinstance(expr, ast.Subscript):
            if not (isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str)):
                return out
            keys.append(expr.slice.value)
            expr = expr.value
        elif (
            call
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in ("get", "pop", "setdefault")
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            keys.append(call.args[0].value)
            expr = call.func.value
        elif call and isinstance(call.func, ast.Attribute) and call.func.attr == "copy":
            expr = call.func.value
        elif call and call.args and func in TRANSPARENT:
            expr = call.args[-1] if func == "cast" else call.args[0]
        elif isinstance(expr, ast.BoolOp):
            expr = expr.values[0]
        elif isinstance(expr, ast.Name) and expr.id in scope.params:
            return [*out, (scope.params[expr.id], keys[::-1])]
        elif isinstance(expr, ast.Name) and expr.id in scope.env:
            values = scope.env[expr.id]
            inner = Scope({**scope.env}, scope.params, scope.attrs)
            inner.env.pop(expr.id)  # a rebinding such as `x = x["a"]` cannot loop
            for value in values:
                out += [(r, k + keys[::-1]) for r, k in _chains(value, inner, depth)]
            return out
        elif (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
        ):
            for value, owner in scope.attrs.get(expr.attr, []):
                out += [(r, k + keys[::-1]) for r, k in _chains(value, owner, depth)]
            if not out and CONFIG_NAME.search(expr.attr):
                out.append(("?", keys[::-1]))
            return out
        else:
            return out
    return out


def _reads(fn: ast.AST, scope: Scope) -> Iterator[tuple[Root, list[str], int]]:
    """Config reads in a function body: (root, keys, line)."""
    for node in ast.walk(fn):
        found: list[tuple[Root, list[str]]] = []
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            found = _chains(node, scope)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("get", "pop", "setdefault"):
                found = _chains(node, scope)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = node.left
            if isinstance(node.ops[0], (ast.In, ast.NotIn)) and isinstance(left, ast.Constant):
                found = [(r, [*k, str(left.value)]) for r, k in _chains(node.comparators[0], scope)]
        for root, keys in found:
            if keys:
                yield root, keys, node.lineno


def _functions(tree: ast.Module) -> Iterator[tuple[ast.ClassDef | None, ast.AST]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node, item


def scan_reads(root: Path, context: dict[str, set[str]]) -> list[tuple[str, Root, list[str], str]]:
    """Every config read under ``nemo_rl/``: (module, root, keys, where)."""
    schema_classes = {name for names in context.values() for name in names}
    out: list[tuple[str, Root, list[str], str]] = []
    for path in py_files(root, "nemo_rl"):
        rel = str(path.relative_to(root))
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes: list[tuple[ast.AST, Scope]] = []
        attrs: dict[int, dict[str, list[tuple[ast.expr, Scope]]]] = {}
        for cls, fn in _functions(tree):
            assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            scope = _scope(fn, schema_classes)
            if cls is not None:  # self.X = ... anywhere in the class
                scope.attrs = attrs.setdefault(id(cls), {})
                for node in ast.walk(fn):
                    if isinstance(node, ast.Assign):
                        for target in node.targets:
                            if (
                                isinstance(target, ast.Attribute)
                                and isinstance(target.value, ast.Name)
                                and target.value.id == "self"
                            ):
                                scope.attrs.setdefault(target.attr, []).append((node.value, scope))
            scopes.append((fn, scope))
        for fn, scope in scopes:
            name = getattr(fn, "name", "?")
            for chain_root, keys, line in _reads(fn, scope):
                out.append((module, chain_root, keys, f"{rel}:{name} (line {line})"))
    return out


def _module_prefixes(module: str, index: Index, context: dict[str, set[str]]) -> set[str]:
    """Prefixes bound to schema classes defined in ``module``'s package or its ancestors."""
    package = module.rpartition(".")[0]
    packages = {".".join(package.split(".")[:i]) for i in range(2, package.count(".") + 2)}
    owned = {
        name
        for mod, classes in index.classes.items()
        if mod.rpartition(".")[0] in packages or mod in packages
        for name in classes
    }
    return {prefix for prefix, names in context.items() if names & owned}


def add_code_reads(
    keys: dict[str, dict[str, Any]],
    reads: list[tuple[str, Root, list[str], str]],
    index: Index,
    context: dict[str, set[str]],
    skip: set[str],
) -> None:
    """Add the keys code reads and the schema lacks; mark exactly-attributed reads as read.

    Exact: a read rooted at a parameter annotated with a schema class (or a self attribute
    assigned from one) is attributed to every prefix that class is bound to.

    Approximate: a read rooted at an unannotated ``config``/``cfg``-named variable, e.g.
    ``config["vllm_cfg"].get("x")``, is attributed to the prefixes P, among those bound to the
    schema classes defined in the reading module's package or its ancestors, for which
    ``P.vllm_cfg`` is already a known mapping; it then adds only the last key. A single-key
    read from an unknown root (``config.get("x")``) cannot be placed and is skipped.
    Approximate reads add keys but never mark an existing key read.
    """
    prefixes_of: dict[str, set[str]] = {}
    for prefix, names in context.items():
        for name in names:
            prefixes_of.setdefault(name, set()).add(prefix)
    known = {k for k, v in keys.items() if {"dict", "any"} & set(v["type"].split("|"))}
    known |= set(context)
    pending: dict[str, tuple[str, bool]] = {}
    for module, root_, chain, where in sorted(reads, key=lambda r: (len(r[2]), r[3])):
        exact = root_.startswith("@")
        if exact:
            bases = prefixes_of.get(root_[1:], set())
        elif len(chain) >= 2:
            mine = _module_prefixes(module, index, context)
            bases = {p for p in mine if _join(p, *chain[:-1]) in known}
        else:
            continue
        for base in bases:
            path, parent = _join(base, *chain), _join(base, *chain[:-1])
            if match(path, skip) or match(parent, skip):
                continue  # under an open subtree
            if parent not in known and parent not in pending:
                continue  # below a key that holds no mapping, or one nothing declares
            if path in keys:
                if exact:
                    keys[path].setdefault("_code_read", where)
            elif path not in pending or (exact and not pending[path][1]):
                pending[path] = (where, exact)
    for path, (where, exact) in sorted(pending.items()):
        keys[path] = {
            "type": "any",
            "declared": False,
            "read": True,
            "where": where,
            "via": "code" if exact else "code-approx",
        }


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def _chain(expr: ast.expr, env: dict[str, ast.expr], params: dict[str, str]) -> list[str]:
    """Return the keys of a ``cfg["a"].get("b")`` access, following local assignments.

    A chain rooted at a parameter annotated with schema class ``C`` starts with ``@C``.
    """
    keys: list[str] = []
    for _ in range(20):
        call = expr if isinstance(expr, ast.Call) else None
        func = ast.unparse(call.func) if call else ""
        if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
            keys, expr = [*keys, str(expr.slice.value)], expr.value
        elif (
            call
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "get"
            and (call.args and isinstance(call.args[0], ast.Constant))
        ):
            keys, expr = [*keys, str(call.args[0].value)], call.func.value
        elif call and call.args and func in ("cast", "dict"):
            expr = call.args[-1]
        elif isinstance(expr, ast.BoolOp):
            expr = expr.values[0]
        elif isinstance(expr, ast.Name) and expr.id in env:
            expr = env.pop(expr.id)  # pop, so a rebinding like `x = x["a"]` cannot loop
        elif isinstance(expr, ast.Name) and expr.id in params:
            return [f"@{params[expr.id]}", *keys[::-1]]
        else:
            break
    return keys[::-1]


def scan_splats(root: Path) -> set[tuple[str, ...]]:
    """Find config subtrees passed to a call as ``**kwargs``, directly or via a local."""
    chains: set[tuple[str, ...]] = set()
    for path in py_files(root, "nemo_rl"):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            env = {
                n.targets[0].id: n.value
                for n in ast.walk(fn)
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
            }
            params = {}
            for arg in (a for a in fn.args.args + fn.args.kwonlyargs if a.annotation):
                names = sorted(n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name))
                if schema := [n for n in names if n.endswith("Config")]:
                    params[arg.arg] = schema[0]
            for node in (n for n in ast.walk(fn) if isinstance(n, ast.keyword) and not n.arg):
                local = env.get(node.value.id) if isinstance(node.value, ast.Name) else None
                splats = [node.value]
                if isinstance(local, ast.Dict):  # kwargs = {**cfg["a"], ...}; f(**kwargs)
                    splats = [v for k, v in zip(local.keys, local.values, strict=True) if k is None]
                chains |= {tuple(c) for v in splats if (c := _chain(v, dict(env), params))}
    return chains


def family_files(root: Path) -> list[Path]:
    """Return the GRPO-family example YAMLs, classified by their inherited top-level keys."""

    def top_keys(path: Path, depth: int = 0) -> set[str]:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        parents = data.get("defaults") or []
        found = {str(k) for k in data}
        for parent in [parents] if isinstance(parents, str) else parents:
            if (path.parent / str(parent)).is_file() and depth < 10:
                found |= top_keys(path.parent / str(parent), depth + 1)
        return found

    files = sorted({p for pattern in YAML_GLOBS for p in root.glob(pattern)})
    return [p for p in files if "grpo" in (top := top_keys(p)) and not top & OTHER_ALGOS]


def match(path: str, patterns: set[str]) -> bool:
    """Return whether ``path`` equals or lies under a pattern (``*`` = any one component)."""
    parts = path.replace("[]", "").split(".")
    for pattern in (p.replace("[]", "").split(".") for p in patterns):
        if len(parts) >= len(pattern) and all(
            p in ("*", q) for p, q in zip(pattern, parts, strict=False)
        ):
            return True
    return False


def flatten(
    node: dict[Any, Any], prefix: str, keys: dict[str, Any], stop: set[str]
) -> Iterator[str]:
    """Yield the key paths of a YAML mapping, not descending below ``stop`` patterns."""
    for key, value in ((str(k), v) for k, v in node.items()):
        if key == "_override_" or (not prefix and key == "defaults"):
            continue  # loader keys, nemo_rl/utils/config.py
        path = f"{prefix}.{key}" if prefix else key
        yield path
        if match(path, stop):
            continue
        if isinstance(value, dict):
            yield from flatten(value, path, keys, stop)
        elif isinstance(value, list) and any(k.startswith(f"{path}[].") for k in keys):
            for item in (i for i in value if isinstance(i, dict)):
                yield from flatten(item, f"{path}[]", keys, stop)


def scan_yaml(
    root: Path, keys: dict[str, Any], stop: set[str], closed: set[str] = frozenset()
) -> tuple[list[str], dict[str, str]]:
    """Add the undeclared key paths that the example YAMLs set.

    Keys under a ``closed`` (library-defined) subtree are never added: they are returned
    with the first file that sets them.

    Returns:
        The GRPO files scanned, the other files whose ``policy:`` was scanned, and the keys
        refused under closed subtrees.
    """
    family = family_files(root)
    files = [str(p.relative_to(root)) for p in family]
    # Other algorithms' configs share GRPO's PolicyConfig: their `policy:` keys count too.
    shared = sorted({p for g in SHARED_GLOBS for p in root.glob(g)} - set(family))
    foreign: dict[str, str] = {}
    used: list[str] = []
    for rel in files + [str(p.relative_to(root)) for p in shared]:
        data = yaml.safe_load((root / rel).read_text(encoding="utf-8")) or {}
        if rel not in files:
            policy = data.get("policy") if isinstance(data, dict) else None
            data = {"policy": policy} if isinstance(policy, dict) else {}
            used += [rel] if data else []
        for key in dict.fromkeys(flatten(data, "", keys, stop)):
            if key not in keys and match(key.rpartition(".")[0], closed):
                foreign.setdefault(key, rel)
                continue
            if key not in keys and not match(key, stop):
                keys[key] = {"type": "any", "declared": False, "where": rel, "seen_in": 0}
            if not keys.get(key, {"declared": True})["declared"]:
                keys[key]["seen_in"] += 1
    return files, used, foreign


def scan_code(root: Path) -> list[tuple[str, set[str], set[str]]]:
    """Return ``(path, reads, tokens)`` per .py file: reads are str literals and attributes."""
    out = []
    for path in py_files(root, "nemo_rl", "examples"):
        try:
            nodes = list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
        except SyntaxError:
            continue
        reads = {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        reads |= {n.attr for n in nodes if isinstance(n, ast.Attribute)}
        names = {n.id for n in nodes if isinstance(n, ast.Name)}
        names |= {n.arg for n in nodes if isinstance(n, ast.arg)}
        out.append((str(path.relative_to(root)), reads, reads | names))
    return out


def read_evidence(
    path: str, code: list[tuple[str, set[str], set[str]]], context: dict[str, set[str]]
) -> str | None:
    """Return why ``path`` looks unread, or None when some file plausibly reads it."""
    parent, _, leaf = path.rpartition(".")
    leaf = leaf.removesuffix("[]")
    hits = [(file, tokens) for file, reads, tokens in code if leaf in reads]
    if not hits:
        return f"no string literal or attribute '{leaf}' under nemo_rl/ or examples/**/*.py"
    name = parent.rpartition(".")[2].removesuffix("[]")
    names = {name, *PARENT_ALIASES.get(parent, ()), *context.get(parent, ())}
    if not parent or any(n in t for _, tokens in hits for t in tokens for n in names):
        return None
    files = ", ".join(file for file, _ in hits[:3]) + (", ..." if len(hits) > 3 else "")
    return (
        f"'{leaf}' is a string literal or attribute only in files that never mention "
        f"'{name}' or a schema class for it ({files})"
    )


def mark_read(
    keys: dict[str, Any],
    open_prefixes: set[str],
    root: Path,
    files: list[str],
    context: dict[str, set[str]],
) -> None:
    """Set ``read``, and ``evidence`` when unread, on every key (parents before children)."""
    code = scan_code(root)
    pattern = r"\$\{([A-Za-z_][\w.]*)\}"  # absolute OmegaConf interpolations
    refs = {m for f in files for m in re.findall(pattern, (root / f).read_text(encoding="utf-8"))}
    for path in sorted(keys):
        entry, parent = keys[path], path.rpartition(".")[0]
        up = keys.get(parent, {"declared": True})
        code_read = entry.pop("_code_read", None)
        if entry.get("via") in ("code", "code-approx") or "read" in entry:
            continue  # found by scan_reads, or a library field
        evidence = MANUAL_UNREAD.get(path)
        if code_read and not evidence:  # read exactly where scan_reads found it
            entry["read"] = True
            continue
        wholesale = path.endswith("*") or (parent and match(parent, open_prefixes))
        # An undeclared mapping that code reads is consumed as a whole, children included.
        if not evidence and not wholesale and (up["declared"] or not up["read"]):
            evidence = read_evidence(path, code, context)
            if evidence and any(r == path or r.startswith(f"{path}.") for r in refs):
                evidence, entry["via"] = None, "interpolation"
        entry["read"] = evidence is None
        if evidence:
            entry["evidence"] = evidence


def _strictly_under(path: str, prefixes: set[str]) -> bool:
    return any(path != p and match(path, {p}) for p in prefixes)


def free_form_reason(prefix: str) -> str | None:
    """The FREE_FORM justification covering ``prefix``, if any."""
    for pattern, reason in FREE_FORM.items():
        pat, parts = pattern.split("."), prefix.split(".")
        if len(pat) == len(parts) and all(a in ("*", b) for a, b in zip(pat, parts, strict=True)):
            return reason
    return None


def build_schema(
    root: Path,
    commit: str,
    libraries: Sequence[Path] = (),
    installed: bool = False,
    log: Any = None,
) -> dict[str, Any]:
    """Build the schema document for the NeMo RL checkout at ``root``.

    ``libraries`` are wheels or unpacked folders of the packages named in LIBRARY_SUBTREES;
    with ``installed``, installed distributions serve for the others. ``log`` receives notes
    (default stderr).
    """
    index = Index(root)
    keys, open_prefixes, context = walk_schema(index, scan_splats(root))
    with tempfile.TemporaryDirectory() as work:
        roots = library_roots(libraries, Path(work), installed)
        lib_keys, closed, below, versions = library_keys(roots, open_prefixes)
    for path, entry in lib_keys.items():
        if path in keys:  # NeMo RL's own TypedDict declares it: its type is what pydantic checks
            continue
        keys[path] = entry
    for prefix in list(closed):
        declared = {k for k in keys if k.startswith(f"{prefix}.") and k not in lib_keys}
        for path in sorted(declared):
            print(
                f"note: {path} is declared by NeMo RL but is not a field of "
                f"{closed[prefix]['source']}",
                file=log or sys.stderr,
            )
    open_prefixes = (open_prefixes - set(closed)) | below
    reasons: dict[str, str] = {}
    for prefix in sorted(open_prefixes):
        reason = (
            "a field typed as a nested object or mapping of the library"
            if prefix in below
            else None
        )
        reason = free_form_reason(prefix) or reason
        if reason is None:
            closed[prefix] = {
                "by": "examples",
                "source": "the keys NeMo RL's published GRPO configs set here "
                "(the library that reads them is not available to the generator)",
            }
        else:
            reasons[prefix] = reason
    open_prefixes = set(reasons)
    # A subtree inside a free-form one is never checked: it needs no closure.
    closed = {p: c for p, c in closed.items() if not _strictly_under(p, open_prefixes)}
    library_closed = {p for p, c in closed.items() if c["by"] == "library"}
    files, shared, foreign = scan_yaml(root, keys, open_prefixes | {GYM_PREFIX}, library_closed)
    for path, where in sorted(foreign.items()):
        print(f"note: {where} sets {path}, not a field of its library", file=log or sys.stderr)
    add_code_reads(keys, scan_reads(root, context), index, context, open_prefixes | {GYM_PREFIX})
    mark_read(keys, open_prefixes | set(closed), root, files, context)
    for path, bound in RANGES.items():
        if path in keys:
            keys[path]["bounds"] = dict(bound)
    source = {
        "repo": "NVIDIA-NeMo/RL",
        "commit": commit,
        "yaml_files": files,
        "policy_yaml_files": shared,
        "generator": "tools/gen_nemo_rl_schema.py",
        "libraries": dict(sorted(versions.items())),
    }
    return {
        "schema_version": 1,
        "source": source,
        # nemo_rl/utils/config.py: `defaults` at the root, `_override_` in a top-level section.
        "loader_keys": {"defaults": [""], "_override_": ["*"]},
        "keys": keys,
        "open": sorted(open_prefixes),
        "open_why": dict(sorted(reasons.items())),
        "closed": dict(sorted(closed.items())),
        "gym": [GYM_PREFIX],
    }


def render(schema: dict[str, Any]) -> str:
    """Render sorted JSON with one line per key, so that regenerations diff cleanly."""
    lines = [
        f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
        for k, v in sorted(schema["keys"].items())
    ]
    body = json.dumps({**schema, "keys": "@KEYS@"}, indent=1, sort_keys=True)
    return body.replace('"@KEYS@"', "{\n" + ",\n".join(lines) + "\n }") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, build the schema and write it atomically."""
    parser = argparse.ArgumentParser(description="Generate rlgate's NeMo RL config-key schema.")
    parser.add_argument("--nemo-rl", type=Path, required=True, help="extracted NeMo RL checkout")
    parser.add_argument("--out", type=Path, required=True, help="output JSON path")
    parser.add_argument("--commit", default="", help="NeMo RL commit sha (default: git HEAD)")
    parser.add_argument(
        "--library",
        type=Path,
        action="append",
        default=[],
        help="wheel or unpacked folder of a package in LIBRARY_SUBTREES (repeatable), e.g. "
        "megatron-core and megatron-bridge from `pip download --no-deps`",
    )
    parser.add_argument(
        "--no-installed",
        action="store_true",
        help="do not read installed packages (vllm) for LIBRARY_SUBTREES",
    )
    args = parser.parse_args(argv)
    if not (args.nemo_rl / "nemo_rl").is_dir():
        print(f"error: {args.nemo_rl} has no nemo_rl/ package", file=sys.stderr)
        return 2
    commit = args.commit
    if not commit:
        git = ["git", "-C", str(args.nemo_rl), "rev-parse", "HEAD"]
        try:
            commit = subprocess.run(git, capture_output=True, text=True).stdout.strip()
        except OSError:  # no git binary
            commit = ""
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        print("error: not a git checkout; pass --commit <40-hex sha>", file=sys.stderr)
        return 2
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    schema = build_schema(args.nemo_rl, commit, args.library, installed=not args.no_installed)
    tmp.write_text(render(schema), encoding="utf-8")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
