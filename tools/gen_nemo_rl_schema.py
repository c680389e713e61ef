"""Generate rlgate's NeMo RL GRPO config-key schema from an extracted NeMo RL checkout.

All static: the checkout is parsed, never imported.

1. Declared keys come from the AST of the TypedDict/BaseModel classes reachable from the GRPO
   ``MasterConfig`` roots. Fields of type ``Any`` or ``dict[str, X]`` are open: any child key
   is allowed.
2. Undeclared keys are the paths that the published GRPO-family example YAMLs set and the walk
   did not produce. Each gets ``"declared": false``, the first file as ``where`` and a
   ``seen_in`` count.
3. A key counts as read if any of these holds:
   - its leaf is a string literal or attribute in a ``nemo_rl/`` or ``examples/**/*.py`` file
     that also mentions the parent key or a schema class for it;
   - it lies in an open subtree, for example one splatted into a call as ``**kwargs``;
   - a ``${...}`` interpolation in the YAMLs references it.
   Unread keys carry an ``evidence`` string.

Paths are dotted. ``[]`` marks list elements and ``*`` matches one path component. The
``gym`` prefixes hold NeMo Gym server configs, which are validated against nemo-gym's models.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
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
# As in NeMo RL's tests/unit/test_config_validation.py, these pick a non-GRPO MasterConfig.
OTHER_ALGOS = {"teachers", "distillation", "dpo", "sft"}
SCALARS = {"bool": "bool", "str": "str", "bytes": "str", "Path": "str"}
SCALARS |= dict.fromkeys(("int", "PositiveInt", "NonNegativeInt"), "int")
SCALARS |= dict.fromkeys(("float", "PositiveFloat"), "float")
WRAPPERS = {"NotRequired", "Required", "ReadOnly", "Annotated", "Final"}
LISTS = {"list", "List", "Sequence", "tuple", "Tuple", "set", "frozenset"}
DICTS = {"dict", "Dict", "Mapping", "MutableMapping"}


def py_files(root: Path, *dirs: str) -> list[Path]:
    """Return the sorted .py files under ``root/<dir>`` for each dir."""
    return [p for d in dirs for p in sorted((root / d).rglob("*.py"))]


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
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
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

    def fields(self, ref: Ref) -> dict[str, tuple[ast.expr, Ref]]:
        """Return ``{key: (annotation, defining class)}``, inherited fields first."""
        out: dict[str, tuple[ast.expr, Ref]] = {}
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
                    out[key] = (stmt.annotation, ref)
        return out

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

    def visit(prefix: str, refs: list[Ref], seen: frozenset[Ref]) -> None:
        refs = index.expand(refs) + EXTRA_BINDINGS.get(prefix, [])
        refs = [r for r in refs if r[1] in index.classes.get(r[0], {})]  # absent in a tiny tree
        context.setdefault(prefix, set()).update(name for _, name in refs)
        for ref in (r for r in refs if r not in seen):
            for key, (ann, owner) in index.fields(ref).items():
                path = f"{prefix}.{key}" if prefix else key
                types, classes, items, is_open = index.analyze(ann, owner[0])
                where = f"{index.paths[owner[0]]}:{owner[1]}"
                entry = keys.setdefault(path, {"type": set(), "declared": True, "where": where})
                entry["type"] |= types
                if is_open:
                    open_prefixes.add(path)
                if classes:
                    visit(path, classes, seen | {ref})
                if items:
                    visit(f"{path}[]", items, seen | {ref})

    for root in ROOTS:
        visit("", [root], frozenset())
    for path, (type_, where) in ENV_KEYS.items():
        keys.setdefault(path, {"type": set(type_.split("|")), "declared": True, "where": where})
    for path, ref in ENV_CLASSES.items():
        visit(path, [ref], frozenset())
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
    return keys, open_prefixes, context


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


def scan_yaml(root: Path, keys: dict[str, Any], stop: set[str]) -> list[str]:
    """Add the undeclared key paths that the example YAMLs set; return the files scanned."""
    files = [str(p.relative_to(root)) for p in family_files(root)]
    for rel in files:
        data = yaml.safe_load((root / rel).read_text(encoding="utf-8")) or {}
        for key in dict.fromkeys(flatten(data, "", keys, stop)):
            if key not in keys and not match(key, stop):
                keys[key] = {"type": "any", "declared": False, "where": rel, "seen_in": 0}
            if not keys.get(key, {"declared": True})["declared"]:
                keys[key]["seen_in"] += 1
    return files


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
        evidence = MANUAL_UNREAD.get(path)
        wholesale = path.endswith("*") or (parent and match(parent, open_prefixes))
        # An undeclared mapping that code reads is consumed as a whole, children included.
        if not evidence and not wholesale and (up["declared"] or not up["read"]):
            evidence = read_evidence(path, code, context)
            if evidence and any(r == path or r.startswith(f"{path}.") for r in refs):
                evidence, entry["via"] = None, "interpolation"
        entry["read"] = evidence is None
        if evidence:
            entry["evidence"] = evidence


def build_schema(root: Path, commit: str) -> dict[str, Any]:
    """Build the schema document for the NeMo RL checkout at ``root``."""
    keys, open_prefixes, context = walk_schema(Index(root), scan_splats(root))
    files = scan_yaml(root, keys, open_prefixes | {GYM_PREFIX})
    mark_read(keys, open_prefixes, root, files, context)
    source = {
        "repo": "NVIDIA-NeMo/RL",
        "commit": commit,
        "yaml_files": files,
        "generator": "tools/gen_nemo_rl_schema.py",
    }
    return {
        "schema_version": 1,
        "source": source,
        # nemo_rl/utils/config.py: `defaults` at the root, `_override_` in a top-level section.
        "loader_keys": {"defaults": [""], "_override_": ["*"]},
        "keys": keys,
        "open": sorted(open_prefixes),
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
    tmp.write_text(render(build_schema(args.nemo_rl, commit)), encoding="utf-8")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
