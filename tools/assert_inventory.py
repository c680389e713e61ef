"""Inventory the ``assert``/``raise`` statements a NeMo RL GRPO run can hit at start-up.

All static: the checkout is parsed with ``ast``, never imported.

1. **Sites.** Every ``assert`` and ``raise`` (not a bare re-raise) in the SCOPE files of a
   NeMo RL checkout, with its file, function (qualified: ``Policy.__init__``), line, the
   asserted condition or the raised expression, the message, and ``when``: the enclosing
   ``if`` conditions (an ``else`` branch as ``not (...)``), innermost last.
2. **Reach.** Which functions a GRPO run can call from its entry points (ENTRIES: the two
   GRPO runners' ``main``). Names are not resolved through imports: a function is reached
   when a reached function mentions its name (a call, an attribute, or a string such as the
   method name ``worker_group.run_all_workers_single_data("train")`` sends to Ray actors);
   a class is reached by its name, and then its dunder methods, validators and bases run.
   Over-approximate by design: ``reached: false`` means no reached function ever names it.
   The graph spans all of ``nemo_rl/`` so that a call through a helper outside SCOPE counts.
3. **Classification.** ``src/rlgate/data/nemo_rl_asserts.json`` holds every site with its
   class, one of CLASSES: ``config`` (a ``recipe check`` rule decides it from the config; the
   rule's code in ``rules``, none yet when ``rules`` is empty), ``model`` (needs the model's
   ``config.json``), ``runtime`` (needs the cluster, the data, the weights...; ``why`` says),
   ``not-on-path`` (a GRPO run does not execute it; ``why`` says). A site is matched to its
   classified entry by identity (file, function, kind, condition; for a raise, the raised
   type and ``when``), the n-th of equal identities to the n-th, so moved lines keep their
   class and an edited condition shows as one new and one vanished site.

Usage::

    git -C <nemo-rl mirror> archive 7ea279a | tar -x -C /tmp/nemo-rl
    python tools/assert_inventory.py /tmp/nemo-rl                  # counts, new, vanished
    python tools/assert_inventory.py /tmp/nemo-rl --update         # merge into the data file
    python tools/assert_inventory.py /tmp/nemo-rl --coverage docs/recipe-rules-coverage.md

``--megatron-lm`` and ``--megatron-bridge`` add those trees (Megatron-LM and Megatron-Bridge
at the commits NeMo RL's submodule pins); vLLM is read from the installed package.

Exit 0 when every site is classified and no classified site vanished, 1 otherwise (a NeMo
RL bump shows the diff), 2 for bad arguments. ``--update`` rewrites the data file with the
scan (new sites unclassified: ``class`` null), keeping every matched classification; the
vanished ones are printed, not kept. ``--coverage FILE`` rewrites the numbers between the
``<!-- inventory:begin -->`` and ``<!-- inventory:end -->`` markers of FILE. ``--outside``
lists, per file, the reached sites of files outside the scope (the next files to add).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "src" / "rlgate" / "data" / "nemo_rl_asserts.json"
SCHEMA_VERSION = 1
CLASSES = ("config", "model", "runtime", "not-on-path")


@dataclass(frozen=True)
class Tree:
    """One source tree the inventory reads: which files, which functions, from where."""

    repo: str  # its name in the data file ("NVIDIA-NeMo/RL", "NVIDIA/Megatron-LM", "vllm"...)
    option: str  # the command-line option that points at it
    scope: tuple[str, ...]  # files whose sites are inventoried (globs, relative to the root)
    functions: tuple[str, ...] = ()  # only the sites of these functions (all when empty)
    entries: tuple[tuple[str, str], ...] = ()  # reachability roots (none: every site reached)
    graph: tuple[str, ...] = ()  # the call graph's files (globs; the scope is added)


# NeMo RL: the GRPO runners and set-up, the loss, the policy and its workers, Megatron set-up,
# vLLM generation, data, checkpointing and logging, NeMo Gym, and what they assert on the way.
NEMO_RL = Tree(
    "NVIDIA-NeMo/RL",
    "nemo_rl",
    scope=(
        "examples/run_grpo.py",
        "examples/nemo_gym/run_grpo_nemo_gym.py",
        "nemo_rl/algorithms/grpo.py",
        "nemo_rl/algorithms/loss/loss_functions.py",
        "nemo_rl/algorithms/utils.py",
        "nemo_rl/algorithms/async_utils/*.py",
        "nemo_rl/distributed/batched_data_dict.py",
        "nemo_rl/distributed/virtual_cluster.py",
        "nemo_rl/models/policy/lm_policy.py",
        "nemo_rl/models/policy/utils.py",
        "nemo_rl/models/policy/workers/*.py",
        "nemo_rl/models/megatron/setup.py",
        "nemo_rl/models/generation/interfaces.py",
        "nemo_rl/models/generation/__init__.py",
        "nemo_rl/models/generation/vllm/*.py",
        "nemo_rl/data/*.py",
        "nemo_rl/utils/checkpoint.py",
        "nemo_rl/utils/logger.py",
        "nemo_rl/environments/nemo_gym.py",
        "nemo_rl/experience/rollouts.py",
    ),
    entries=(("examples/run_grpo.py", "main"), ("examples/nemo_gym/run_grpo_nemo_gym.py", "main")),
    graph=("nemo_rl/**/*.py",),
)
# Megatron-core (the commit Megatron-Bridge pins in NeMo RL's 3rdparty/): the checks that
# NeMo RL's megatron_cfg keys reach when the model and its parallel groups are built.
MEGATRON_LM = Tree(
    "NVIDIA/Megatron-LM",
    "megatron_lm",
    scope=(
        "megatron/core/model_parallel_config.py",
        "megatron/core/parallel_state.py",
        "megatron/core/transformer/moe/moe_layer.py",
        "megatron/core/transformer/transformer_config.py",
    ),
    functions=(
        "resolve_tensor_parallel_weight_shards",
        "ModelParallelConfig.__post_init__",
        "TransformerConfig.__post_init__",
        "MLATransformerConfig.__post_init__",
        "initialize_model_parallel",
        "MoELayer.forward",
    ),
)
# vLLM (the installed package): what every sampling request and the engine's cache config
# check, and the engine's model config against its parallelism and max_model_len.
VLLM = Tree(
    "vllm",
    "vllm",
    scope=("vllm/sampling_params.py", "vllm/config/cache.py", "vllm/config/model.py"),
    functions=(
        "SamplingParams._verify_args",
        "CacheConfig",
        "ModelConfig.verify_with_parallel_config",
        "ModelConfig._verify_with_expert_parallelism",
        "_get_and_verify_max_len",
    ),
)
# Megatron-Bridge (NeMo RL's 3rdparty/ submodule pin): ConfigContainer.validate, which
# MegatronPolicyWorker.__init__ runs on the container setup.py's _create_megatron_config builds,
# and what it calls: the sub-configs' finalize, its _validate_* helpers, the module validators.
MEGATRON_BRIDGE = Tree(
    "NVIDIA-NeMo/Megatron-Bridge",
    "megatron_bridge",
    scope=(
        "src/megatron/bridge/training/config.py",
        "src/megatron/bridge/utils/cuda_graph.py",
        "src/megatron/bridge/training/flex_dispatcher_backend.py",
        "src/megatron/bridge/training/post_training/checkpointing.py",
    ),
    functions=(
        "ConfigContainer.validate",
        "ConfigContainer.get_data_parallel_size",
        "ConfigContainer._validate_and_apply_deterministic_mode",
        "ConfigContainer._validate_and_apply_megatron_fsdp_configs",
        "ConfigContainer._validate_and_apply_megatron_fsdp_v1_configs",
        "ConfigContainer._validate_and_apply_megatron_fsdp_v2_configs",
        "ConfigContainer._validate_hf_checkpoint_export_source",
        "ConfigContainer._disable_native_energon_packing_moe_overlap",
        "ConfigContainer._validate_cp_comm_type",
        "ConfigContainer._validate_training_scheduler_compatibility",
        "ConfigContainer._calculate_scheduler_steps",
        "DistributedDataParallelConfig.finalize",
        "OptimizerConfig.finalize",
        "SchedulerConfig.finalize",
        "TrainingConfig.finalize",
        "CheckpointConfig.finalize",
        "LoggerConfig.finalize",
        "ProfilingConfig.finalize",
        "TensorInspectConfig.finalize",
        "NVRxStragglerDetectionConfig.finalize",
        "_validate_and_sync_distributed_optimizer_settings",
        "_validate_mixed_precision_consistency",
        "_validate_fine_grained_activation_offloading",
        "validate_cuda_graph_configuration",
        "validate_flex_dispatcher_backend",
        "_validate_modelopt_checkpointing",
    ),
)
TREES = (NEMO_RL, MEGATRON_LM, MEGATRON_BRIDGE, VLLM)
# Methods a class runs when it is built or used by protocol, and decorators whose methods
# pydantic or dataclasses call at construction.
_CLASS_HOOKS = re.compile(r"__\w+__")
_VALIDATORS = {"model_validator", "field_validator", "validator", "root_validator"}
_IDENT = re.compile(r"[A-Za-z_][\w.]*")  # a name or a dotted path (the last part counts)


@dataclass(frozen=True, slots=True)
class Site:
    """One ``assert``/``raise`` of a tree, or (``kind == "implicit"``) an expression that raises."""

    repo: str
    file: str
    function: str
    line: int
    kind: str  # "assert" | "raise" | "implicit"
    test: str  # the asserted condition, the raised type, or the implicit expression
    when: str  # enclosing if-conditions, innermost last, joined with " and "
    message: str
    reached: bool = True

    def identity(self) -> tuple[str, ...]:
        """What stays the same when the site only moves: see the module docstring."""
        if self.kind == "raise":
            return (self.repo, self.file, self.function, self.kind, self.test, self.when)
        return (self.repo, self.file, self.function, self.kind, self.test)


def site_id(identity: tuple[str, ...], occurrence: int) -> str:
    """A short stable id for the ``occurrence``-th site of ``identity``."""
    raw = json.dumps([*identity, occurrence]).encode()
    return hashlib.sha1(raw).hexdigest()[:12]


# -- scanning -----------------------------------------------------------------------------


def _text(node: ast.expr | None) -> str:
    """A message as read: a string constant verbatim, anything else unparsed."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                conversion = f"!{chr(value.conversion)}" if value.conversion > 0 else ""
                spec = f":{_text(value.format_spec)}" if value.format_spec else ""
                parts.append("{" + ast.unparse(value.value) + conversion + spec + "}")
        return "".join(parts)
    return ast.unparse(node)


def _raised(exc: ast.expr) -> tuple[str, str]:
    """(type, message) of a raised expression: ``ValueError("x")`` -> ("ValueError", "x")."""
    if isinstance(exc, ast.Call):
        message = " ".join(_text(a) for a in exc.args) if exc.args else ""
        return ast.unparse(exc.func), message
    return ast.unparse(exc), ""


class _Scanner(ast.NodeVisitor):
    """Collect sites and, per function, the names it mentions."""

    def __init__(self, repo: str, rel: str) -> None:
        self.repo, self.rel = repo, rel
        self.stack: list[str] = []
        self.conds: list[str] = []
        self.sites: list[Site] = []
        self.refs: dict[str, set[str]] = defaultdict(set)
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.AST] = {}
        self.globals: set[str] = set()

    @property
    def where(self) -> str:
        return ".".join(self.stack) or "<module>"

    def visit_Module(self, node: ast.Module) -> None:
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            if isinstance(stmt, ast.AnnAssign):
                targets = [stmt.target]
            self.globals |= {t.id for t in targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        qual = ".".join([*self.stack, node.name])
        self.classes[qual] = node
        for deco in node.decorator_list:
            self.visit(deco)
        self.stack.append(node.name)
        saved, self.conds = self.conds, []
        for stmt in node.body:
            self.visit(stmt)
        self.conds = saved
        self.stack.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for deco in node.decorator_list:
            self.visit(deco)
        self.stack.append(node.name)
        self.functions[self.where] = node
        saved, self.conds = self.conds, []
        for stmt in node.body:
            self.visit(stmt)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        self.conds = saved
        self.stack.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        cond = ast.unparse(node.test)
        loose = isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.Or)
        loose = loose or isinstance(node.test, (ast.IfExp, ast.NamedExpr, ast.Lambda))
        self.conds.append(f"({cond})" if loose else cond)  # joined with " and " below
        for stmt in node.body:
            self.visit(stmt)
        self.conds[-1] = f"not ({cond})"
        for stmt in node.orelse:
            self.visit(stmt)
        self.conds.pop()

    def visit_Assert(self, node: ast.Assert) -> None:
        self.generic_visit(node)
        self.sites.append(
            Site(
                self.repo,
                self.rel,
                self.where,
                node.lineno,
                "assert",
                ast.unparse(node.test),
                " and ".join(self.conds),
                _text(node.msg),
            )
        )

    def visit_Raise(self, node: ast.Raise) -> None:
        self.generic_visit(node)
        if node.exc is None:
            return  # a bare re-raise repeats an error counted where it was raised
        kind, message = _raised(node.exc)
        self.sites.append(
            Site(
                self.repo,
                self.rel,
                self.where,
                node.lineno,
                "raise",
                kind,
                " and ".join(self.conds),
                message,
            )
        )

    def visit_Name(self, node: ast.Name) -> None:
        self.refs[self.where].add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.generic_visit(node)
        if not _CLASS_HOOKS.fullmatch(node.attr):  # super().__init__: resolved by class bases
            self.refs[self.where].add(node.attr)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _IDENT.fullmatch(node.value):
            self.refs[self.where].add(node.value.rpartition(".")[2])


@dataclass
class Scan:
    """The sites of one tree's scope, and the parsed functions (for implicit sites)."""

    tree: Tree
    sites: list[Site] = field(default_factory=list)
    functions: dict[tuple[str, str], ast.AST] = field(default_factory=dict)
    outside: int = 0  # reached sites in files outside the scope
    outside_files: Counter[str] = field(default_factory=Counter)  # ... per file


def _globbed(root: Path, patterns: Iterable[str]) -> list[Path]:
    return sorted({p for pat in patterns for p in root.glob(pat) if p.is_file()})


def _in_functions(tree: Tree, function: str) -> bool:
    return not tree.functions or any(
        function == f or function.startswith(f"{f}.") for f in tree.functions
    )


def scan(tree: Tree, root: Path) -> Scan:
    """Scan one tree at ``root``: its scope's sites, each marked reached or not."""
    scope = {p.relative_to(root).as_posix() for p in _globbed(root, tree.scope)}
    missing = [pat for pat in tree.scope if not _globbed(root, [pat])]
    if missing:
        raise SystemExit(f"error: {root} is not a {tree.repo} tree: no {', '.join(missing)}")
    files = _globbed(root, [*tree.graph, *tree.scope, *(f for f, _ in tree.entries)])
    scanners = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        scanner = _Scanner(tree.repo, rel)
        scanner.visit(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        scanners.append(scanner)
    reached = _reach(scanners, tree.entries) if tree.entries else None
    out = Scan(tree)
    for scanner in scanners:
        if scanner.rel not in scope:
            if reached is not None:
                hits = sum((scanner.rel, s.function) in reached for s in scanner.sites)
                out.outside += hits
                if hits:
                    out.outside_files[scanner.rel] = hits
            continue
        for qual, node in [*scanner.functions.items(), *scanner.classes.items()]:
            out.functions[(scanner.rel, qual)] = node
        for site in scanner.sites:
            if _in_functions(tree, site.function):
                hit = reached is None or (scanner.rel, site.function) in reached
                out.sites.append(replace(site, reached=hit))
    out.sites.sort(key=lambda s: (s.file, s.line))
    return out


def implicit_found(found: Scan, entry: dict[str, Any]) -> int | None:
    """The line of the function holding an implicit site's expression, None when gone."""
    node = found.functions.get((entry["file"], entry["function"]))
    if node is None or entry["test"] not in ast.unparse(node):
        return None
    return getattr(node, "lineno", 0)


def _reach(
    scanners: Sequence[_Scanner], entries: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The (file, function) pairs reachable from ``entries`` by name (module docstring)."""
    by_name: dict[str, set[tuple[str, str]]] = defaultdict(set)
    hooks: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)  # class -> run on build
    bases: dict[tuple[str, str], set[str]] = defaultdict(set)
    members: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    refs: dict[tuple[str, str], set[str]] = {}
    for sc in scanners:
        module = (sc.rel, "<module>")  # its top-level code runs when the module is imported
        refs[module] = sc.refs.get("<module>", set())
        for name in sc.globals:  # a module-level table (a registry dict) names functions
            by_name[name].add(module)
        for qual, node in sc.functions.items():
            key = (sc.rel, qual)
            refs[key] = sc.refs.get(qual, set())
            hooks[key].add(module)
            name = qual.rpartition(".")[2]
            owner = qual.rpartition(".")[0]
            if owner in sc.classes and (
                _CLASS_HOOKS.fullmatch(name) or _decorated(node, _VALIDATORS)
            ):
                hooks[(sc.rel, owner)].add(key)
            elif not _CLASS_HOOKS.fullmatch(name):
                by_name[name].add(key)
        for qual, cls in sc.classes.items():
            key = (sc.rel, qual)
            by_name[qual.rpartition(".")[2]].add(key)
            refs[key] = sc.refs.get(qual, set())
            bases[key] = {ast.unparse(b).rpartition(".")[2] for b in cls.bases}
        for qual, node in [*sc.functions.items(), *sc.classes.items()]:
            owner = qual.rpartition(".")[0]
            if owner in sc.functions and _decorated(node, None):
                # registered by a decorator where it is defined (a FastAPI route, a hook)
                hooks[(sc.rel, owner)].add((sc.rel, qual))
            if owner in sc.classes:
                members[(sc.rel, owner)].add((sc.rel, qual))
    # A class with a base from a library: its methods and those it inherits from NeMo RL
    # classes may be overrides the library calls.
    for key, names in bases.items():
        if any(not by_name.get(n) for n in names - {"object", "ABC", "Protocol"}):
            todo, seen = [key], set()
            while todo:
                cls = todo.pop()
                if cls in seen:
                    continue
                seen.add(cls)
                hooks[key] |= members[cls]
                todo += [b for n in bases.get(cls, ()) for b in by_name.get(n, ()) if b in bases]
    seen: set[tuple[str, str]] = set()
    todo = [e for e in entries if e in refs]
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        todo += hooks.get(key, ())
        for base in bases.get(key, ()):
            todo += by_name.get(base, ())
        for name in refs.get(key, ()):
            todo += by_name.get(name, ())
    return seen


def _decorated(node: ast.AST, names: set[str] | None) -> bool:
    """Whether ``node`` has a decorator (named one of ``names``, when given)."""
    for deco in getattr(node, "decorator_list", []):
        target = deco.func if isinstance(deco, ast.Call) else deco
        if names is None or ast.unparse(target).rpartition(".")[2] in names:
            return True
    return False


# -- the data file --------------------------------------------------------------------------


def load_data(path: Path) -> dict[str, Any]:
    """The classified inventory (an empty one when the file does not exist)."""
    if not path.exists():
        return {"schema_version": SCHEMA_VERSION, "sources": {}, "sites": []}
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SystemExit(f"error: {path}: schema_version {data.get('schema_version')!r}")
    return data


def _ids(sites: Iterable[Site]) -> list[str]:
    seen: Counter[tuple[str, ...]] = Counter()
    out = []
    for site in sites:
        ident = site.identity()
        out.append(site_id(ident, seen[ident]))
        seen[ident] += 1
    return out


_CLASSIFICATION = ("class", "rules", "why")


@dataclass
class Diff:
    """Scans against the classified data."""

    merged: list[dict[str, Any]]
    new: list[dict[str, Any]]
    vanished: list[dict[str, Any]]


def diff(scans: Sequence[Scan], data: dict[str, Any]) -> Diff:
    """Match each scanned tree's sites to the data's entries (ids: identity and occurrence).

    Entries of trees not scanned are kept as they are; an implicit entry is kept while its
    function still holds its expression.
    """
    scanned = {s.tree.repo: s for s in scans}
    old = {e["id"]: e for e in data.get("sites", []) if e["repo"] in scanned}
    merged = [e for e in data.get("sites", []) if e["repo"] not in scanned]
    new, vanished = [], []
    for found in scans:
        for sid, site in zip(_ids(found.sites), found.sites, strict=True):
            entry = {"id": sid, **asdict(site)}
            prev = old.pop(sid, None)
            for key in _CLASSIFICATION:
                entry[key] = prev.get(key) if prev else ([] if key == "rules" else None)
            if not prev or prev.get("class") not in CLASSES:
                new.append(entry)
            merged.append(entry)
    for entry in old.values():
        implicit = entry["kind"] == "implicit"
        line = implicit_found(scanned[entry["repo"]], entry) if implicit else None
        if line is not None:
            merged.append({**entry, "line": line})
        elif entry.get("class") in CLASSES:
            vanished.append(entry)
    order = {t.repo: i for i, t in enumerate(TREES)}
    merged.sort(key=lambda e: (order.get(e["repo"], len(order)), e["file"], e["line"], e["id"]))
    return Diff(merged, new, vanished)


def counts(entries: Sequence[dict[str, Any]]) -> dict[str, int]:
    """The inventory's numbers (what docs/recipe-rules-coverage.md shows)."""
    by_class = Counter(e.get("class") for e in entries)

    def ruled(cls: str) -> int:
        return sum(1 for e in entries if e.get("class") == cls and e.get("rules"))

    return {
        "found": len(entries),
        "reached": sum(1 for e in entries if e["reached"]),
        "on_path": sum(by_class[c] for c in ("config", "model", "runtime")),
        "config": by_class["config"],
        "config_ruled": ruled("config"),
        "model": by_class["model"],
        "model_ruled": ruled("model"),
        "runtime": by_class["runtime"],
        "not_on_path": by_class["not-on-path"],
        "unclassified": sum(1 for e in entries if e.get("class") not in CLASSES),
    }


_ROWS = (
    ("found", "sites found (`assert`/`raise` in the scope, and implicit ones)"),
    ("reached", "reached by name from the GRPO entry points"),
    ("on_path", "on a GRPO run's start-up path (config + model + runtime)"),
    ("config", "config-decidable"),
    ("config_ruled", "config-decidable with a rule"),
    ("model", "model-decidable (the model's `config.json`)"),
    ("model_ruled", "model-decidable with a rule"),
    ("runtime", "runtime-only"),
    ("not_on_path", "not on a GRPO run's path"),
    ("unclassified", "unclassified"),
)


def coverage_table(entries: Sequence[dict[str, Any]], sources: dict[str, Any]) -> str:
    """The Markdown table of the numbers, one column per tree and the total.

    ``sources[repo]["reached_outside"]``: the reached sites in files outside a tree's scope.
    """
    repos = [t.repo for t in TREES if any(e["repo"] == t.repo for e in entries)]
    columns = [counts([e for e in entries if e["repo"] == r]) for r in repos]
    total = counts(entries)
    refs = [str(sources.get(r, {}).get("ref", "?"))[:10] for r in repos]
    head = " | ".join(f"{r} `{ref}`" for r, ref in zip(repos, refs, strict=True))
    lines = [
        f"| sites | {head} | total |",
        "|---|" + "---|" * (len(repos) + 1),
    ]
    for key, what in _ROWS:
        cells = " | ".join(str(c[key]) for c in columns)
        lines.append(f"| {what} | {cells} | {total[key]} |")
    outside = {
        r: sources[r]["reached_outside"] for r in repos if "reached_outside" in sources.get(r, {})
    }
    if outside:
        cells = " | ".join(str(outside[r]) if r in outside else "-" for r in repos)
        what = "reached sites in files outside the scope (not inventoried)"
        lines.append(f"| {what} | {cells} | {sum(outside.values())} |")
    return "\n".join(lines)


BEGIN, END = "<!-- inventory:begin -->", "<!-- inventory:end -->"


def write_coverage(path: Path, table: str) -> None:
    """Replace the text between the markers of ``path`` with ``table``."""
    text = path.read_text(encoding="utf-8")
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"error: {path} has no {BEGIN} ... {END} markers")
    _atomic_write(path, f"{head}{BEGIN}\n{table}\n{END}{tail}")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def render(data: dict[str, Any]) -> str:
    """The data file's text: one site per line, so a bump's diff reads site by site."""
    head = json.dumps({k: v for k, v in data.items() if k != "sites"}, indent=1)
    body = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in data["sites"])
    return head[:-2] + ',\n "sites": [\n' + body + "\n ]\n}\n"


def _git_commit(root: Path) -> str:
    try:
        git = ["git", "-C", str(root), "rev-parse", "HEAD"]
        return subprocess.run(git, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:  # no git binary
        return ""


def _installed_vllm() -> tuple[Path | None, str]:
    """The installed vLLM's import root and version, without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None, ""
    return Path(next(iter(spec.submodule_search_locations))).parent, importlib.metadata.version(
        "vllm"
    )


def _lines(entries: Iterable[dict[str, Any]]) -> Iterator[str]:
    for e in entries:
        when = f" [when {e['when']}]" if e["when"] else ""
        where = f"{e['repo']}:{e['file']}:{e['line']}"
        yield f"  {where} {e['function']}: {e['kind']} {e['test']}{when}"


def main(argv: Sequence[str] | None = None) -> int:
    """Scan, compare with the data file, print the numbers and the diff."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nemo_rl", type=Path, help="a NeMo RL checkout (git archive is enough)")
    parser.add_argument("--nemo-rl-ref", default="", help="its commit (default: git HEAD)")
    parser.add_argument("--megatron-lm", type=Path, help="a Megatron-LM checkout")
    parser.add_argument("--megatron-lm-ref", default="", help="its commit (default: git HEAD)")
    parser.add_argument("--megatron-bridge", type=Path, help="a Megatron-Bridge checkout")
    parser.add_argument("--megatron-bridge-ref", default="", help="its commit (default: git HEAD)")
    parser.add_argument("--vllm", type=Path, help="vLLM's import root (default: installed)")
    parser.add_argument("--vllm-ref", default="", help="its version (default: installed)")
    parser.add_argument("--data", type=Path, default=DATA, help="the classified inventory")
    parser.add_argument("--update", action="store_true", help="merge the scan into --data")
    parser.add_argument("--coverage", type=Path, help="rewrite the numbers in this Markdown file")
    parser.add_argument(
        "--outside", action="store_true", help="list the reached sites outside the scope per file"
    )
    args = parser.parse_args(argv)
    vllm_root, vllm_version = _installed_vllm()
    roots = {
        NEMO_RL.repo: (args.nemo_rl, args.nemo_rl_ref or _git_commit(args.nemo_rl)),
        MEGATRON_LM.repo: (args.megatron_lm, args.megatron_lm_ref),
        MEGATRON_BRIDGE.repo: (args.megatron_bridge, args.megatron_bridge_ref),
        VLLM.repo: (args.vllm or vllm_root, args.vllm_ref or ("" if args.vllm else vllm_version)),
    }
    if args.megatron_lm and not args.megatron_lm_ref:
        roots[MEGATRON_LM.repo] = (args.megatron_lm, _git_commit(args.megatron_lm))
    if args.megatron_bridge and not args.megatron_bridge_ref:
        roots[MEGATRON_BRIDGE.repo] = (args.megatron_bridge, _git_commit(args.megatron_bridge))
    data = load_data(args.data)
    sources = dict(data.get("sources", {}))
    scans = []
    for tree in TREES:
        root, ref = roots[tree.repo]
        if root is None:
            print(f"{tree.repo}: not scanned (--{tree.option.replace('_', '-')} not given)")
            continue
        if not root.is_dir():
            print(f"error: {root} is not a directory", file=sys.stderr)
            return 2
        if not ref:
            opt = f"--{tree.option.replace('_', '-')}-ref"
            print(f"error: {root}: not a git checkout; pass {opt}", file=sys.stderr)
            return 2
        scans.append(scan(tree, root))
        sources[tree.repo] = {
            "ref": ref,
            "scope": list(tree.scope),
            **({"functions": list(tree.functions)} if tree.functions else {}),
            **({"entries": ["::".join(e) for e in tree.entries]} if tree.entries else {}),
            **({"reached_outside": scans[-1].outside} if tree.entries else {}),
        }
    result = diff(scans, data)
    table = coverage_table(result.merged, sources)
    print(table)
    if args.outside:
        for found in scans:
            if found.outside_files:
                print(f"\n{found.tree.repo}: reached sites in files outside the scope")
                for rel, hits in sorted(found.outside_files.items(), key=lambda x: (-x[1], x[0])):
                    print(f"  {hits:5d} {rel}")
    if result.new:
        print(f"\n{len(result.new)} site(s) not classified:")
        print("\n".join(_lines(result.new)))
    if result.vanished:
        print(f"\n{len(result.vanished)} classified site(s) vanished:")
        print("\n".join(_lines(result.vanished)))
    if args.update:
        out = {"schema_version": SCHEMA_VERSION, "sources": sources, "sites": result.merged}
        _atomic_write(args.data, render(out))
    if args.coverage:
        write_coverage(args.coverage, table)
    return 1 if result.new or result.vanished else 0


if __name__ == "__main__":
    raise SystemExit(main())
