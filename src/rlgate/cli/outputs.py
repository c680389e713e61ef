"""Every command's path options, declared once: which are outputs, which are inputs.

:func:`guarded` (entered by ``rlgate.cli.app.main`` around every command) opens the
command's :class:`~rlgate.core.io.OutputGuard`, declares the outputs its options name (with
their defaults) and then the inputs they name, so an output that is, links to or lies inside
an input is refused with exit 2 before any work. What the command reads later joins the same
guard where it is read: every file of ``core.io``'s readers (a recipe's ``defaults:`` chain
as the loader follows it, a run manifest, a run JSON), the history database when
:func:`rlgate.cli.history.open_db` opens it, the run directory a run JSON names
(``report.build``); every writer of ``core.io`` consults the guard before it writes.

The roles are :class:`rlgate.core.io.Role` (shared with the pytest plugin, whose options
carry theirs); ``watch`` takes a run directory or its manifest file (:attr:`Role.RUN`: the
directory is an input either way).

``tests/unit/test_output_guard.py`` walks every subparser of
:func:`rlgate.cli.app.build_parser`: an option in no table here fails it, and so does an
option named like an output (:data:`OUTPUT_NAMES`) that is not declared as one, so a new
command's output cannot escape the guard.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rlgate.core.io import Role

__all__ = [
    "COMMANDS",
    "NOT_PATHS",
    "OUTPUT_NAMES",
    "Role",
    "command_key",
    "guarded",
    "leaf_commands",
    "output_like",
    "role",
    "unclassified",
]


F, D, P, R = Role.FILE_OUT, Role.DIR_OUT, Role.PATH, Role.RECIPE
_DB = {"db": Role.DB}

#: Per command (``rlgate <command> [<action>]``): every option that is, or could be taken
#: for, a path. Options of :data:`NOT_PATHS` need no entry.
COMMANDS: dict[str, dict[str, Role]] = {
    "versions": {},
    "run": {"pytest_args": Role.PYTEST},
    "recipe check": {
        "args": Role.CONFIGS,
        "tokenizers": Role.ROOT,
        "model_config": P,
        "json_out": F,
        "junit_out": F,
        "cache_dir": D,
    },
    "recipe import-suite": {"script": P, "out": F},
    "check-run": {
        "run": P,
        "recipe": R,
        "baseline": P,
        "rollouts": P,
        "band_run": P,
        "sync_run": P,
        "json_out": F,
        "junit_out": F,
        **_DB,
    },
    "launch": {
        "recipe": R,
        "site": P,
        "nemo_rl_dir": Role.CHECKOUT,
        "tokenizers": Role.ROOT,
        "run_dir": D,
    },
    "watch": {"run_dirs": Role.RUN, "junit_out": F},
    "bisect": {
        "recipe": R,
        "site": P,
        "nemo_rl_dir": Role.CHECKOUT,
        "work_dir": D,
        "good": Role.NAME,
        "bad": Role.NAME,
        "retries": Role.NAME,
        **_DB,
    },
    "budget": {"nightly": P},
    "bench rollout": {
        "recipe": R,
        "tokenizers": Role.ROOT,
        "baseline": P,
        "json_out": F,
        "plot_out": F,
    },
    "swe compare": {
        "before": P,
        "after": P,
        "dataset": P,
        "recipe": R,
        "json": F,
        "junit": F,
        **_DB,
    },
    "swe power": {"json": F},
    "swe eval": {
        "predictions": P,
        "dataset": P,
        "run_dir": D,
        "output_dir": D,  # the gym / nemo-skills results (what it holds is resumed)
        "gym_input": P,
        "site": P,
        "nemo_rl_dir": Role.CHECKOUT,
        # paths on the cluster, passed to the engine as they are (never read or written here)
        "gym_config": Role.NAME,
        "container_formatter": Role.NAME,
    },
    "report": {
        "junit": P,
        "run": P,
        "swe": P,
        "recipe": R,
        "baseline": P,
        "band_run": P,
        "tokenizers": Role.ROOT,
        "out": D,
        "site": P,
        "canary": P,  # rlgate canary --json, read (report/canary_section.py)
        **_DB,
    },
    "history record": {
        "junit": P,
        "run_json": P,
        "swe_json": P,
        "run_dir": P,
        "swe_run": Role.PAIRS,
        "dataset": P,
        "recipe": R,
        **_DB,
    },
    "history show": {"recipe": Role.NAME, **_DB},
    "history export": {"out": F, "recipe": Role.NAME, **_DB},
    "history flaky": {"json_out": F, **_DB},
    "history changes": {
        "recipe": Role.NAME,
        "check": Role.NAME,
        "branch": Role.NAME,
        "json_out": F,
        **_DB,
    },
    "history prune": {"before": Role.NAME, **_DB},
    "history promote": _DB,
    "history demote": _DB,
    "history quarantine add": {
        "recipe": Role.NAME,
        "reason": Role.NAME,
        "owner": Role.NAME,
        "until": Role.NAME,
        "runs": Role.NAME,
        **_DB,
    },
    "history quarantine list": {"all": Role.NAME, "json_out": F, **_DB},
    "history quarantine remove": {"target": Role.NAME, "recipe": Role.NAME, **_DB},
    "canary": {
        "moves": Role.NAME,  # PKG==VER or PKG@PATH: read by rlgate.canary.stack, never written
        "recipes": R,
        "tokenizers": Role.ROOT,
        "cache_dir": Role.NAME,  # rlgate's own cache, written only inside its own entries
        "constraints": P,
        "work_dir": D,
        "json_out": F,
        "junit_out": F,
        **_DB,  # --db: the candidate's runs recorded on canary/<stack>
    },
    "triage": {"candidate": P, "json_out": F, "junit_out": F, **_DB},
}

#: Options that are never a path, in any command (counts, names, flags, ids, URLs).
NOT_PATHS = frozenset(
    {
        "after_model", "agent_framework", "allow_pull", "alpha", "backend", "baseline_commit",
        "before_model", "branch", "cancel_stalled", "cap", "check", "cluster", "commit",
        "concurrency", "condition", "cpus_per_instance", "demo", "discordance", "dry_run",
        "entrypoint", "exclude", "flaky_rate", "follow", "force", "format", "hardware",
        "gpus_per_node", "gym_agent", "harness_run_id", "help", "instance_ids", "interval",
        "keep_last",
        "label", "last", "launch", "list",
        "main_branch", "margin_pp", "max_infra_error_rate", "max_steps", "max_workers", "minutes",
        "minutes_per_instance", "modal", "model", "n", "nightly_id", "no_cache", "no_check",
        "nodes",
        "no_plots", "no_retry", "noise_fraction", "override", "overrides", "parser_lengths",
        "power", "quiet",
        "ray_address", "recipe_name", "repeats", "resamples", "run_id", "run_ids", "seed", "seeds",
        "server_gpus", "server_url", "split", "stall_factor", "stall_minutes", "steps",
        "steps_per_run", "table", "tier", "timeout_minutes", "timeout_seconds", "turns", "watch",
    }
)  # fmt: skip

#: Option names that say "output": each must be declared FILE_OUT/DIR_OUT (or be one of
#: :data:`INPUTS_NAMED_LIKE_OUTPUTS`).
OUTPUT_NAMES = frozenset(
    {"--json", "--junit", "--out", "--output", "-o", "--csv", "--parquet", "--plot", "--html",
     "--markdown", "--md", "--xml", "--png", "--save", "--write", "--report", "--dump"}
)  # fmt: skip
#: ``rlgate report --junit`` and ``history record --junit`` read JUnit; they write nothing.
INPUTS_NAMED_LIKE_OUTPUTS = frozenset({("report", "junit"), ("history record", "junit")})


def _report_out(args: argparse.Namespace) -> str | None:
    from rlgate.cli.report import out_dir

    return out_dir(args)


def _eval_run_dir(args: argparse.Namespace) -> Path | None:
    from rlgate.cli.swe import eval_run_dir

    return eval_run_dir(args)


#: Where an output goes when its option is not given (the command's own default).
DEFAULTS: dict[tuple[str, str], Callable[[argparse.Namespace], Any]] = {
    ("report", "out"): _report_out,
    ("swe eval", "run_dir"): _eval_run_dir,
}


def _gym_writes(args: argparse.Namespace) -> list[Path]:
    if getattr(args, "backend", None) != "gym" or not getattr(args, "output_dir", None):
        return []
    from rlgate.launch.swe_eval import LEASE, LEASE_LOCK
    from rlgate.swe.backends import gym_writes

    out = Path(args.output_dir)
    return [*gym_writes(out), out / LEASE, out / LEASE_LOCK]


#: The files a command writes inside an output directory option (``dest``): declared as file
#: outputs too, so an input that is one of them is refused (``swe eval --gym-input
#: <output dir>/ng_run.log``) while the rest of the directory may hold inputs.
WRITES_INSIDE: dict[str, tuple[str, Callable[[argparse.Namespace], list[Path]]]] = {
    "swe eval": ("output_dir", _gym_writes),
}


# --- the walk ---------------------------------------------------------------------------------


def command_key(args: argparse.Namespace) -> str:
    """``"history export"`` for ``rlgate history export ...`` (``args.<command>_command``).

    Nested actions too: ``"history quarantine add"`` (``args.quarantine_command``).
    """
    parts = [str(args.command)]
    while action := getattr(args, f"{parts[-1].replace('-', '_')}_command", None):
        parts.append(str(action))
    return " ".join(parts)


def leaf_commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable command of ``parser``: (its key, its parser)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and prefix:
        yield " ".join(prefix), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_commands(sub, (*prefix, name))


def role(key: str, dest: str) -> Role | None:
    """What option ``dest`` of command ``key`` names (None: nobody said)."""
    found = COMMANDS.get(key, {}).get(dest)
    if found is not None:
        return found
    return Role.NAME if dest in NOT_PATHS else None


def _flag(action: argparse.Action) -> str:
    longest = max(action.option_strings, key=len, default="")
    return longest or str(action.metavar or action.dest).upper()


def unclassified(parser: argparse.ArgumentParser) -> list[str]:
    """``"<command>: <flag> (<dest>)"`` for every option no table classifies."""
    return [
        f"{key}: {_flag(action)} ({action.dest})"
        for key, leaf in leaf_commands(parser)
        for action in leaf._actions
        if role(key, action.dest) is None
    ]


def output_like(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(command, dest) of every option taking a value whose name or help says it writes."""
    found = []
    for key, leaf in leaf_commands(parser):
        for action in leaf._actions:
            if action.nargs == 0:  # a flag (--force "write into ..."), not a path
                continue
            helptext = (action.help or "").lower()
            named = bool(set(action.option_strings) & OUTPUT_NAMES)
            dest = action.dest
            if (
                named
                or dest == "out"
                or dest.endswith("_out")
                or helptext.startswith(("write", "draw", "save", "output"))
            ):
                found.append((key, dest))
    return found


# --- the guard --------------------------------------------------------------------------------


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _declare_inputs(guard: Any, role_: Role, flag: str, values: Sequence[Any]) -> None:
    """Add one option's inputs to ``guard`` (refused at once against its outputs)."""
    if role_ is Role.CONFIGS:
        from rlgate.cli.args import split_configs_and_overrides

        values = split_configs_and_overrides([str(v) for v in values])[0]
        role_ = Role.RECIPE
    chain = None
    if role_ is Role.RECIPE:
        from rlgate.recipe.load import config_files as chain  # OmegaConf: only for a recipe
    guard.add_option(role_, flag, values, chain=chain)
    if role_ is Role.RUN:
        for value in values:
            for path, what in _manifest_paths(value):
                guard.add_input(path, what, check=True)


#: The paths a run manifest names, all inside its run directory as written.
MANIFEST_PATHS = ("log_dir", "checkpoint_dir", "driver_log", "slurm_log_root")


def _manifest_paths(run: Any) -> list[tuple[Path, str]]:
    """What ``run``'s manifest names (its log_dir, ...): inputs, also where a link leads out.

    A manifest that cannot be read adds nothing here: the command reports it for that run.
    """
    from rlgate.core.errors import RlgateError
    from rlgate.launch.manifest import load_manifest

    try:
        manifest = load_manifest(run)
    except RlgateError:
        return []
    root = Path(manifest.run_dir)
    return [
        (root / value, f"{key} of the run manifest of {run}")
        for key in MANIFEST_PATHS
        if (value := getattr(manifest, key))
    ]


@contextlib.contextmanager
def guarded(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Iterator[Any]:
    """The command's output guard, its outputs and command-line inputs declared (or None).

    A command asked to write nothing opens no guard: there is nothing to keep apart.
    """
    key = command_key(args)
    table = COMMANDS.get(key, {})
    leaf = dict(leaf_commands(parser)).get(key)
    actions = {a.dest: a for a in leaf._actions} if leaf is not None else {}
    outputs = []
    for dest, what in table.items():
        if what.output:
            value = getattr(args, dest, None)
            if value is None and (key, dest) in DEFAULTS:
                value = DEFAULTS[key, dest](args)
            if value is not None:
                outputs.append((_flag(actions[dest]) if dest in actions else dest, value, what))
    if not outputs:
        yield None
        return
    from rlgate.core.io import output_guard

    with output_guard() as guard:
        for flag, value, what in outputs:
            guard.add_output(value, flag, directory=what is Role.DIR_OUT)
        if key in WRITES_INSIDE:
            dest, files = WRITES_INSIDE[key]
            for path in files(args):
                guard.add_output(path, f"{_flag(actions[dest])}'s {path.name}")
        for dest, what in table.items():
            if what.path and not what.output and what is not Role.DB:
                flag = _flag(actions[dest]) if dest in actions else dest
                _declare_inputs(guard, what, flag, _values(getattr(args, dest, None)))
        yield guard
