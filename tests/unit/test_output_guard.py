"""No output of any command lands on, links to or lies inside one of its inputs (issue 18).

Regression stories: ``recipe check child.yaml --json base/parent.yaml`` overwrote a file of
the config's ``defaults:`` chain (only the configs named on the command line were compared);
``check-run --junit RUN/…`` and ``watch RUN --junit RUN/driver.log`` wrote inside the run
directory they read; an output that was a hard link to an input, or a report file linked to
one, was written; an output named like the history database's ``-wal`` file was written.
Each command kept its own partial list of inputs. Now every command declares its path
options once (:mod:`rlgate.cli.outputs`), readers add what they read, and every writer
consults the one guard (:class:`rlgate.core.io.OutputGuard`).

Every case runs the real command on real files and asserts exit 2, one ``rlgate: error:``
line (plus an optional hint), the input's bytes unchanged and nothing created.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlgate.cli import outputs
from rlgate.cli.app import build_parser, main
from rlgate.testing.corpus import Fault, corpus_recipe

from .helpers import report_inputs as ri
from .helpers.corpus_build import corpus

# --- inputs made by the real producers ----------------------------------------------------------


def chain(tmp: Path) -> tuple[Path, Path]:
    """``recipes/child.yaml`` whose ``defaults:`` is ``base/parent.yaml`` (the corpus recipe)."""
    parent = tmp / "recipes" / "base" / "parent.yaml"
    parent.parent.mkdir(parents=True, exist_ok=True)
    parent.write_text(corpus_recipe(), encoding="utf-8")
    child = tmp / "recipes" / "child.yaml"
    child.write_text("defaults: base/parent.yaml\n", encoding="utf-8")
    return child, parent


def run_dir(tmp: Path) -> Path:
    """A copy of the corpus's healthy TensorBoard run (NeMo RL's tag names)."""
    return Path(shutil.copytree(corpus().runs[Fault.HEALTHY], tmp / "run"))


def event_file(run: Path) -> Path:
    return next(p for p in sorted(run.rglob("*")) if "tfevents" in p.name)


def history_db(tmp: Path) -> Path:
    """An SQLite history database holding one recorded run (rlgate's own writer)."""
    db = tmp / "h.db"
    code = main(["history", "record", "--db", str(db), "--junit", str(ri.functional_passing()),
                 "--recipe-name", "r", "--run-id", "seed"])  # fmt: skip
    assert code == 0
    return db


def hard_link(target: Path, link: Path) -> Path:
    os.link(target, link)
    return link


def tokenizer_root(tmp: Path) -> Path:
    root = tmp / "tok" / "qwen3.5-35b-a3b"
    root.mkdir(parents=True)
    (root / "tokenizer_config.json").write_text('{"model_max_length": 262144}')
    return root.parent


# --- the cases ---------------------------------------------------------------------------------


@dataclass
class Case:
    argv: list[str]
    keep: list[Path]  # inputs whose bytes must not change
    says: str  # in the one error line
    absent: tuple[Path, ...] = ()  # must not be created


Builder = Callable[[Path], Case]


def _recipe_check_chain(tmp: Path) -> Case:
    child, parent = chain(tmp)
    return Case(["recipe", "check", str(child), "--json", str(parent)], [parent, child],
                "one of the inputs (defaults chain of")  # fmt: skip


def _recipe_check_hard_link(tmp: Path) -> Case:
    child, parent = chain(tmp)
    link = hard_link(child, tmp / "out.json")
    return Case(["recipe", "check", str(child), "--json", str(link)], [child, parent],
                "hard link to one of the inputs")  # fmt: skip


def _recipe_check_dotdot(tmp: Path) -> Case:
    child, _ = chain(tmp)
    out = child.parent / "base" / ".." / child.name
    return Case(["recipe", "check", str(child), "--json", str(out)], [child], "one of the inputs")


def _recipe_check_tokenizers(tmp: Path) -> Case:
    child, _ = chain(tmp)
    tok = tokenizer_root(tmp)
    out = tok / "qwen3.5-35b-a3b" / "tokenizer_config.json"
    return Case(["recipe", "check", str(child), "--tokenizers", str(tok), "--json", str(out)],
                [out], "inside the input directory")  # fmt: skip


def _check_run(tmp: Path, *extra: str) -> list[str]:
    child, _ = chain(tmp)
    return ["check-run", str(run_dir(tmp)), "--recipe", str(child), *extra]


def _check_run_chain(tmp: Path) -> Case:
    parent = tmp / "recipes" / "base" / "parent.yaml"
    argv = _check_run(tmp, "--json", str(parent))
    return Case(argv, [parent], "one of the inputs (defaults chain of")


def _check_run_event_file(tmp: Path) -> Case:
    argv = _check_run(tmp)
    events = event_file(tmp / "run")
    return Case([*argv, "--junit", str(events)], [events], "inside the input directory")


def _check_run_new_file_in_run(tmp: Path) -> Case:
    argv = _check_run(tmp)
    out = tmp / "run" / "gate.json"
    return Case([*argv, "--json", str(out)], [event_file(tmp / "run")],
                "inside the input directory", (out,))  # fmt: skip


def _check_run_symlinked_run(tmp: Path) -> Case:
    argv = _check_run(tmp)
    (tmp / "alias").symlink_to(tmp / "run", target_is_directory=True)
    out = tmp / "alias" / "gate.xml"
    return Case([*argv, "--junit", str(out)], [event_file(tmp / "run")],
                "inside the input directory", (tmp / "run" / "gate.xml",))  # fmt: skip


def _check_run_db(tmp: Path) -> Case:
    db = history_db(tmp)
    argv = _check_run(tmp, "--db", str(db), "--json", str(db))
    return Case(argv, [db], "one of the inputs (the history database")


def _check_run_db_wal(tmp: Path) -> Case:
    db = history_db(tmp)
    wal = Path(f"{db}-wal")
    argv = _check_run(tmp, "--db", str(db), "--junit", str(wal))
    return Case(argv, [db], "one of the inputs (the history database", (wal,))


def _check_run_rollouts_link(tmp: Path) -> Case:
    rollouts = Path(shutil.copy(corpus().rollouts["healthy"], tmp / "rollouts.jsonl"))
    link = hard_link(rollouts, tmp / "gate.json")
    argv = _check_run(tmp, "--rollouts", str(rollouts), "--json", str(link))
    return Case(argv, [rollouts], "hard link to one of the inputs")


def _swe_maps(tmp: Path) -> tuple[Path, list[Path], list[Path]]:
    from rlgate.demo.build import BUNDLED_INSTANCES, write_demo_swe

    dataset = Path(shutil.copy(BUNDLED_INSTANCES, tmp / "dataset.json"))
    ids = [row["instance_id"] for row in json.loads(dataset.read_text())]
    before, after = write_demo_swe(tmp / "maps", ids, seeds=2, seed=1)
    return dataset, before, after


def _swe(tmp: Path, *extra: str) -> tuple[list[str], Path, list[Path], list[Path]]:
    dataset, before, after = _swe_maps(tmp)
    argv = ["swe", "compare", "--before", *map(str, before), "--after", *map(str, after),
            "--dataset", str(dataset), "--resamples", "100", *extra]  # fmt: skip
    return argv, dataset, before, after


def _swe_hard_link(tmp: Path) -> Case:
    argv, _, _, after = _swe(tmp)
    link = hard_link(after[0], tmp / "swe.json")
    return Case([*argv, "--json", str(link)], after, "hard link to one of the inputs")


def _swe_symlinked_dataset(tmp: Path) -> Case:
    argv, dataset, _, _ = _swe(tmp)
    (tmp / "swe.xml").symlink_to(dataset)
    return Case([*argv, "--junit", str(tmp / "swe.xml")], [dataset],
                "symbolic link to one of the inputs")  # fmt: skip


def _swe_result_dir(tmp: Path) -> Case:
    argv, _, _, after = _swe(tmp)
    out = after[0].parent / "swe.json"  # the folder holds the maps: not an input directory
    argv[argv.index("--after") + 1 : argv.index("--dataset")] = [str(after[0].parent)]
    return Case([*argv, "--json", str(out)], after, "inside the input directory", (out,))


def _swe_eval_run_dir_in_dataset(tmp: Path) -> Case:
    dataset = tmp / "SWE-bench_Verified"
    dataset.mkdir()
    (dataset / "test.parquet").write_bytes(b"PAR1")
    preds = tmp / "preds.jsonl"
    preds.write_text('{"instance_id": "a__b-1", "model_name_or_path": "m", "model_patch": ""}\n')
    argv = ["swe", "eval", "--predictions", str(preds), "--harness-run-id", "r", "--dataset",
            str(dataset), "--run-dir", str(dataset / "r")]  # fmt: skip
    return Case(argv, [preds, dataset / "test.parquet"], "inside the input directory",
                (dataset / "r",))  # fmt: skip


def _watch(tmp: Path, out: Callable[[Path], Path], says: str, *, manifest: bool = False) -> Case:
    from rlgate.launch.manifest import MANIFEST_NAME

    from .helpers.launch_fixtures import launch_local, stop_local_run, wait_for

    run = launch_local(tmp)
    try:
        wait_for(lambda: (run / "launch" / "exit_status").is_file())
    finally:
        stop_local_run(run)
    log = run / "driver.log"
    given = run / MANIFEST_NAME if manifest else run  # watch takes either form
    argv = ["watch", str(given), "--interval", "0.2", "--junit", str(out(run))]
    return Case(argv, [log, run / MANIFEST_NAME], says)


def _watch_driver_log(tmp: Path) -> Case:
    return _watch(tmp, lambda run: run / "driver.log", "inside the input directory")


def _watch_manifest_file_driver_log(tmp: Path) -> Case:
    """``watch RUN/rlgate_manifest.json``: the run directory it describes is an input too."""
    return _watch(tmp, lambda run: run / "driver.log", "inside the input directory", manifest=True)


def _watch_manifest_file_new_file(tmp: Path) -> Case:
    case = _watch(tmp, lambda run: run / "watch.xml", "inside the input directory", manifest=True)
    case.absent = (Path(case.argv[-1]),)
    return case


def _watch_linked_log_dir(tmp: Path) -> Case:
    """The manifest's log_dir is a link to a folder elsewhere: that folder is an input too."""
    case = _watch(tmp, lambda run: run / "unused.xml", "inside the input directory")
    run = Path(case.argv[1])
    elsewhere = tmp / "shared-logs"
    (run / "logs").rename(elsewhere)
    (run / "logs").symlink_to(elsewhere, target_is_directory=True)
    out = elsewhere / "watch.xml"
    case.argv[-1] = str(out)
    case.keep = [*case.keep, *sorted(p for p in elsewhere.rglob("*") if p.is_file())]
    case.absent = (out,)
    return case


def _watch_linked_log(tmp: Path) -> Case:
    return _watch(tmp, lambda run: hard_link(run / "driver.log", tmp / "watch.xml"),
                  "hard link to one of the inputs")  # fmt: skip


def _report(tmp: Path, out: Path, *extra: str) -> list[str]:
    full = ri.full_set()
    return ["report", "--junit", *map(str, full["junit"]), "--run", str(full["runs"][0]),
            "--swe", str(tmp / "swe.json"), "--out", str(out), "--no-plots", *extra]  # fmt: skip


def _report_swe(tmp: Path) -> Path:
    return Path(shutil.copy(ri.full_set()["swe"], tmp / "swe.json"))


def _report_linked_output(tmp: Path) -> Case:
    swe = _report_swe(tmp)
    out = tmp / "out"
    out.mkdir()
    hard_link(swe, out / "report.json")
    return Case([*_report(tmp, out), "--force"], [swe], "where the report writes an output")


def _report_symlinked_output(tmp: Path) -> Case:
    swe = _report_swe(tmp)
    out = tmp / "out"
    out.mkdir()
    (out / "junit.xml").symlink_to(swe)
    return Case([*_report(tmp, out), "--force"], [swe], "where the report writes an output")


def _report_in_tokenizers(tmp: Path) -> Case:
    _report_swe(tmp)
    tok = tokenizer_root(tmp)
    out = tok / "qwen3.5-35b-a3b" / "report"
    return Case(_report(tmp, out, "--tokenizers", str(tok)), [], "inside the input directory",
                (out,))  # fmt: skip


def _report_baseline_dir(tmp: Path) -> Case:
    _report_swe(tmp)
    base = run_dir(tmp)
    argv = _report(tmp, base / "report", "--baseline", str(base))
    return Case(argv, [event_file(base)], "inside the input directory", (base / "report",))


def _export_linked_db(tmp: Path) -> Case:
    db = history_db(tmp)
    link = hard_link(db, tmp / "results.csv")
    return Case(["history", "export", str(link), "--db", str(db)], [db],
                "hard link to one of the inputs")  # fmt: skip


def _export_wal(tmp: Path) -> Case:
    db = history_db(tmp)
    wal = Path(f"{db}-wal")
    return Case(["history", "export", str(wal), "--db", str(db), "--format", "csv"], [db],
                "one of the inputs (the history database", (wal,))  # fmt: skip


def _flaky_linked_db(tmp: Path) -> Case:
    db = history_db(tmp)
    link = hard_link(db, tmp / "flaky.json")
    return Case(["history", "flaky", "--db", str(db), "--json", str(link)], [db],
                "hard link to one of the inputs")  # fmt: skip


def _triage(tmp: Path, *extra: str) -> tuple[list[str], Path]:
    candidate = Path(shutil.copy(ri.check_run(Fault.HEALTHY)[0], tmp / "run.json"))
    return ["triage", "--candidate", str(candidate), *extra], candidate


def _triage_linked_candidate(tmp: Path) -> Case:
    argv, candidate = _triage(tmp, "--db", str(tmp / "h.db"))
    link = hard_link(candidate, tmp / "triage.json")
    return Case([*argv, "--json", str(link)], [candidate], "hard link to one of the inputs")


def _triage_db_shm(tmp: Path) -> Case:
    db = history_db(tmp)
    argv, candidate = _triage(tmp, "--db", str(db), "--json", f"{db}-shm")
    return Case(argv, [db, candidate], "one of the inputs (the history database",
                (Path(f"{db}-shm"),))  # fmt: skip


def _triage_junit_dotdot(tmp: Path) -> Case:
    argv, candidate = _triage(tmp, "--db", str(tmp / "h.db"))
    out = tmp / "sub" / ".." / candidate.name
    return Case([*argv, "--junit", str(out)], [candidate], "one of the inputs (--candidate: ")


def _check_run_band_from_recipe(tmp: Path) -> Case:
    """A band run the recipe's ``rlgate.band.runs`` glob finds is an input too (load_run)."""
    child, _ = chain(tmp)
    band = Path(shutil.copytree(corpus().band_runs[0], child.parent / "band" / "seed_0"))
    out = band / "gate.json"
    argv = ["check-run", str(run_dir(tmp)), "--recipe", str(child), "--json", str(out)]
    return Case(argv, [event_file(band)], "inside the input directory", (out,))


def _bench_chain(tmp: Path) -> Case:
    child, parent = chain(tmp)
    return Case(["bench", "rollout", "--recipe", str(child), "--json", str(parent)], [parent],
                "one of the inputs (defaults chain of")  # fmt: skip


def _bench_linked_baseline(tmp: Path) -> Case:
    child, _ = chain(tmp)
    baseline = tmp / "baseline.json"
    baseline.write_text("{}")
    link = hard_link(baseline, tmp / "bench.png")
    argv = ["bench", "rollout", "--recipe", str(child), "--baseline", str(baseline),
            "--plot", str(link)]  # fmt: skip
    return Case(argv, [baseline], "hard link to one of the inputs")


def _launch_in_tokenizers(tmp: Path) -> Case:
    from .helpers.launch_fixtures import ONE_NODE, recipe_named

    recipe = recipe_named(tmp, "r")
    tok = tokenizer_root(tmp)
    argv = ["launch", str(recipe), *ONE_NODE, "--backend", "local", "--dry-run", "--no-check",
            "--tokenizers", str(tok), "--run-dir", str(tok / "qwen3.5-35b-a3b")]  # fmt: skip
    return Case(argv, [recipe], "one of the inputs (a tokenizer of --tokenizers")


CASES: dict[str, Builder] = {
    "recipe_check-json-defaults_chain": _recipe_check_chain,
    "recipe_check-json-hard_link": _recipe_check_hard_link,
    "recipe_check-json-dotdot": _recipe_check_dotdot,
    "recipe_check-json-tokenizer_dir": _recipe_check_tokenizers,
    "check_run-json-defaults_chain": _check_run_chain,
    "check_run-junit-event_file_of_run": _check_run_event_file,
    "check_run-json-new_file_in_run": _check_run_new_file_in_run,
    "check_run-junit-through_symlinked_run": _check_run_symlinked_run,
    "check_run-json-history_db": _check_run_db,
    "check_run-junit-history_db_wal": _check_run_db_wal,
    "check_run-json-hard_link_to_rollouts": _check_run_rollouts_link,
    "swe_compare-json-hard_link_to_a_map": _swe_hard_link,
    "swe_compare-junit-symlink_to_dataset": _swe_symlinked_dataset,
    "swe_compare-json-in_result_dir": _swe_result_dir,
    "swe_eval-run_dir-in_dataset_dir": _swe_eval_run_dir_in_dataset,
    "watch-junit-driver_log": _watch_driver_log,
    "watch-junit-hard_link_to_driver_log": _watch_linked_log,
    "watch-junit-in_log_dir_linked_out_of_the_run": _watch_linked_log_dir,
    "watch_manifest_file-junit-driver_log": _watch_manifest_file_driver_log,
    "watch_manifest_file-junit-new_file_in_run": _watch_manifest_file_new_file,
    "report-out-hard_link_at_report_json": _report_linked_output,
    "report-out-symlink_at_junit_xml": _report_symlinked_output,
    "report-out-in_tokenizer_dir": _report_in_tokenizers,
    "report-out-in_baseline_run": _report_baseline_dir,
    "history_export-out-hard_link_to_db": _export_linked_db,
    "history_export-out-db_wal": _export_wal,
    "history_flaky-json-hard_link_to_db": _flaky_linked_db,
    "triage-json-hard_link_to_candidate": _triage_linked_candidate,
    "triage-json-history_db_shm": _triage_db_shm,
    "triage-junit-dotdot_to_candidate": _triage_junit_dotdot,
    "check_run-json-in_band_run_of_recipe_glob": _check_run_band_from_recipe,
    "bench_rollout-json-defaults_chain": _bench_chain,
    "bench_rollout-plot-hard_link_to_baseline": _bench_linked_baseline,
    "launch-run_dir-in_tokenizer_dir": _launch_in_tokenizers,
}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) in (1, 2) and lines[0].startswith("rlgate: error: "), err
    assert len(lines) == 1 or lines[1].startswith("  hint: "), err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


@pytest.mark.parametrize("name", list(CASES))
def test_an_output_on_an_input_is_exit_2_and_the_input_is_kept(tmp_path, capsys, name) -> None:
    case = CASES[name](tmp_path)
    kept = {path: path.read_bytes() for path in case.keep}
    capsys.readouterr()
    code = main(case.argv)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert case.says in _one_line(err)
    assert {path: path.read_bytes() for path in case.keep} == kept
    for path in case.absent:
        assert not path.exists() and not path.is_symlink(), path


# --- every output option of every command is declared ---------------------------------------------


def test_every_option_of_every_command_is_classified() -> None:
    """A new option must say what it is (rlgate.cli.outputs.COMMANDS or NOT_PATHS)."""
    assert outputs.unclassified(build_parser()) == []


def test_every_output_looking_option_is_a_declared_output() -> None:
    found = outputs.output_like(build_parser())
    assert found, "the walk found no output option at all"
    roles = {(key, dest): outputs.role(key, dest) for key, dest in found}
    named_like = outputs.INPUTS_NAMED_LIKE_OUTPUTS
    wrong = {k: r for k, r in roles.items() if not r.output and k not in named_like}
    assert wrong == {}
    # the ones the issue names, so the walk cannot pass by finding nothing
    assert {("check-run", "json_out"), ("check-run", "junit_out"), ("watch", "junit_out"),
            ("recipe check", "json_out"), ("report", "out"), ("history export", "out"),
            ("swe compare", "junit"), ("bench rollout", "plot_out")} <= set(found)  # fmt: skip


def test_the_tables_name_only_commands_and_options_that_exist() -> None:
    parsers = dict(outputs.leaf_commands(build_parser()))
    assert set(outputs.COMMANDS) == set(parsers)
    for key, table in outputs.COMMANDS.items():
        dests = {a.dest for a in parsers[key]._actions}
        assert set(table) <= dests, (key, set(table) - dests)
    every = {a.dest for p in parsers.values() for a in p._actions}
    assert outputs.NOT_PATHS <= every
    paths = {d for t in outputs.COMMANDS.values() for d, r in t.items() if r.path}
    assert not outputs.NOT_PATHS & paths  # a name that is a path somewhere is declared per command


def test_the_walk_catches_a_new_output_option() -> None:
    parser = build_parser()
    leaf = dict(outputs.leaf_commands(parser))["history show"]
    leaf.add_argument("--csv", dest="csv_out", help="write the trend as CSV here")
    assert outputs.unclassified(parser) == ["history show: --csv (csv_out)"]
    assert ("history show", "csv_out") in outputs.output_like(parser)


def test_nested_commands_name_their_subparser_dest_as_the_guard_reads_it() -> None:
    """``main`` finds a command's table from ``args.command`` + ``args.<command>_command``."""
    top = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in top.choices.items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                assert action.dest == f"{name}_command"
                for sub in action.choices:
                    args = argparse.Namespace(command=name, **{action.dest: sub})
                    assert outputs.command_key(args) == f"{name} {sub}"
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            assert outputs.command_key(argparse.Namespace(command=name)) == name


def test_a_command_without_outputs_opens_no_guard(tmp_path) -> None:
    args = argparse.Namespace(command="budget", nightly=str(tmp_path / "n.yaml"), cap=None)
    with outputs.guarded(build_parser(), args) as guard:
        assert guard is None


# --- outputs that are not regular files ----------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")


def _char_device(path: Path) -> Path:
    """A node for the kernel's null device (1, 3), as /dev/null is, in a scratch folder."""
    import stat as st

    os.mknod(path, 0o666 | st.S_IFCHR, os.makedev(1, 3))
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _socket(path: Path) -> Path:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the socket file stays
    return path


def _kind(path: Path) -> str:
    import stat as st

    if path.is_symlink():
        return f"link -> {os.readlink(path)}"
    mode = path.stat().st_mode
    return next(
        name
        for name, test in (
            ("char", st.S_ISCHR),
            ("fifo", st.S_ISFIFO),
            ("socket", st.S_ISSOCK),
            ("file", st.S_ISREG),
        )
        if test(mode)
    )


#: name -> (makes the output in a scratch folder, the flag, what the one error line says)
SPECIAL: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "char_device": (lambda d: _char_device(d / "null"), "--json", "it is a character device"),
    "link_to_char_device": (
        lambda d: (d / "out.json").symlink_to(_char_device(d / "null")) or d / "out.json",
        "--json",
        "it is a character device",
    ),
    "proc_fd_link": (  # what /dev/stdout is
        lambda d: (d / "stdout").symlink_to("/proc/self/fd/1") or d / "stdout",
        "--junit",
        "it is in /proc",
    ),
    "fifo": (lambda d: _fifo(d / "out.fifo"), "--json", "it is a FIFO"),
    "socket": (lambda d: _socket(d / "out.sock"), "--junit", "it is a socket"),
    "in_proc": (lambda d: Path("/proc/self/rlgate-out.json"), "--json", "it is in /proc"),
}
ROOT_ONLY = {"char_device", "link_to_char_device"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[needs_root] if n in ROOT_ONLY else []) for n in SPECIAL],
)
def test_an_output_that_is_not_a_regular_file_is_exit_2_and_kept(tmp_path, capsys, name) -> None:
    """Refused before any work (a rename would replace /dev/null as root, or a FIFO)."""
    make, flag, says = SPECIAL[name]
    scratch = tmp_path / "d"
    scratch.mkdir()
    out = make(scratch)
    before = _kind(out) if out.exists() or out.is_symlink() else None
    made = sorted(p.name for p in scratch.iterdir())
    argv = _check_run(tmp_path, flag, str(out))
    capsys.readouterr()
    code = main(argv)
    stdout, err = capsys.readouterr()
    assert code == 2, stdout + err
    line = _one_line(err)
    assert says in line and f"{flag} {out}" in line
    assert (_kind(out) if out.exists() or out.is_symlink() else None) == before
    assert sorted(p.name for p in scratch.iterdir()) == made  # no temporary sibling either


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/dev/rlgate-never-written.json", "it is in /dev"),
        ("/dev/stdout", "it is in /dev"),
        ("/dev/fd/1", "it is in /proc"),  # /dev/fd -> /proc/self/fd
        ("/sys/kernel/rlgate.json", "it is in /sys"),
    ],
)
def test_a_system_place_is_refused_when_declared(path, says) -> None:
    """The guard refuses these at declaration: nothing is ever created in the real /dev."""
    from rlgate.core.errors import RlgateError
    from rlgate.core.io import OutputGuard

    with pytest.raises(RlgateError, match="refusing to write --json") as caught:
        OutputGuard().add_output(path, "--json")
    assert says in caught.value.message and caught.value.hint
    assert not Path("/dev/rlgate-never-written.json").exists()


def test_a_directory_output_in_proc_is_refused(tmp_path, capsys) -> None:
    code = main(_report(tmp_path, Path("/proc/self/rlgate-report")))
    _, err = capsys.readouterr()
    assert code == 2 and "it is in /proc" in _one_line(err)


# --- the pytest plugin's outputs: --rlgate-json and pytest's --junitxml --------------------------

TIERS = Path(__file__).resolve().parents[1]  # tests/: the real tier modules are copied


def _tier_tree(tmp: Path) -> Path:
    """A scratch tree: the real convergence tier, and a corpus run, band, baseline, recipe chain.

    ``c/child.yaml``'s ``defaults:`` is ``c/parent.yaml`` (the corpus recipe, whose
    ``rlgate.band.runs`` glob finds ``c/band/seed_*``).
    """
    src = corpus()
    c = tmp / "c"
    shutil.copytree(src.runs[Fault.HEALTHY], c / "runs" / "healthy")
    for run in src.band_runs:
        shutil.copytree(run, c / "band" / run.name)
    shutil.copytree(src.baseline, c / "baseline")
    shutil.copy(src.recipe, c / "parent.yaml")
    (c / "child.yaml").write_text("defaults: parent.yaml\n")
    shutil.copy(src.rollouts["healthy"], c / "rollouts.jsonl")
    (c / "swe").mkdir()
    (c / "swe" / "results.json").write_text("{}")
    shutil.copytree(TIERS / "convergence", tmp / "tests" / "convergence",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (tmp / "pytest.ini").write_text("[pytest]\nstrict = true\n")
    tokenizer_root(tmp)
    return tmp


def _tier(root: Path, *args: str, rlgate_run: bool = False) -> tuple[int, str]:
    import subprocess
    import sys

    head = ["-m", "rlgate.cli", "run", "convergence"] if rlgate_run else ["-m", "pytest"]
    proc = subprocess.run(
        [sys.executable, *head, "-q", "-p", "no:cacheprovider", "-p", "rlgate.pytest_plugin",
         "tests/convergence", "--rlgate-run-dir", "c/runs/healthy", *args],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _band_event(root: Path) -> Path:
    return event_file(root / "c" / "band" / "seed_0")


CHILD = ("--rlgate-recipe", "c/child.yaml")


#: name -> (the arguments after --rlgate-run-dir, given the tree; what the one error line says)
def _dotdot_through_link(root: Path) -> list[str]:
    """``c/lnk/../parent.yaml`` with ``c/lnk -> c/runs/healthy``: pytest opens ``c/parent.yaml``
    (it normalises ``lnk/..`` away before the OS follows the link)."""
    (root / "c" / "lnk").symlink_to(root / "c" / "runs" / "healthy")
    return [*CHILD, "--junitxml", "c/lnk/../parent.yaml"]


PLUGIN: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "junitxml-dotdot_through_a_link": (
        _dotdot_through_link,
        "one of the inputs (defaults chain of c/child.yaml",
    ),
    "rlgate_json-defaults_chain": (
        lambda r: [*CHILD, "--rlgate-json", "c/parent.yaml"],
        "one of the inputs (defaults chain of c/child.yaml",
    ),
    "rlgate_json-band_run_of_recipe_glob": (
        lambda r: [*CHILD, "--rlgate-json", str(_band_event(r))],
        "inside the input directory",
    ),
    "rlgate_json-given_band_run": (
        lambda r: [
            *CHILD,
            "--rlgate-band-run",
            "c/band/seed_1",
            "--rlgate-json",
            "c/band/seed_1/gate.json",
        ],
        "inside the input directory c/band/seed_1 (--rlgate-band-run)",
    ),
    "junitxml-recipe": (
        lambda r: [*CHILD, "--junitxml", "c/child.yaml"],
        "one of the inputs (--rlgate-recipe: c/child.yaml)",
    ),
    "junitxml-in_run_dir": (
        lambda r: [*CHILD, "--junitxml", "c/runs/healthy/tier.xml"],
        "inside the input directory c/runs/healthy (--rlgate-run-dir)",
    ),
    "rlgate_json-in_baseline": (
        lambda r: [
            *CHILD,
            "--rlgate-baseline",
            "c/baseline",
            "--rlgate-json",
            "c/baseline/gate.json",
        ],
        "inside the input directory c/baseline (--rlgate-baseline)",
    ),
    "junitxml-hard_link_to_rollouts": (
        lambda r: [
            *CHILD,
            "--rlgate-rollouts",
            "c/rollouts.jsonl",
            "--junitxml",
            str(hard_link(r / "c" / "rollouts.jsonl", r / "t.xml")),
        ],
        "hard link to one of the inputs (--rlgate-rollouts",
    ),
    "junitxml-in_swe_results": (
        lambda r: ["--rlgate-swe-before", "c/swe", "--junitxml", "c/swe/tier.xml"],
        "inside the input directory c/swe (--rlgate-swe-before)",
    ),
    "rlgate_json-in_tokenizer": (
        lambda r: [
            *CHILD,
            "--rlgate-tokenizers",
            "tok",
            "--rlgate-json",
            "tok/qwen3.5-35b-a3b/gate.json",
        ],
        "inside the input directory tok/qwen3.5-35b-a3b (a tokenizer of --rlgate-tokenizers)",
    ),
    "both-same_file": (
        lambda r: [
            *CHILD,
            "--rlgate-json",
            "o.xml",
            "--junitxml",
            "o.xml",
        ],
        "--rlgate-json and --junitxml name the same file",
    ),
    "junitxml-fifo": (
        lambda r: [*CHILD, "--junitxml", str(_fifo(r / "out.fifo"))],
        "it is a FIFO",
    ),
}


def _snapshot(root: Path) -> dict[Path, bytes | str]:
    """Every file under ``root`` -> its bytes (a FIFO or socket: its kind)."""
    found: dict[Path, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            if not path.is_dir():
                found[path] = _kind(path)
            continue
        found[path] = path.read_bytes()
    return found


class TestPytestPlugin:
    """The plugin's outputs are the CLI's: one guard, every input, before any test runs."""

    @pytest.mark.parametrize("name", list(PLUGIN))
    def test_an_output_on_an_input_is_a_usage_error_and_nothing_runs(self, tmp_path, name) -> None:
        root = _tier_tree(tmp_path)
        args, says = PLUGIN[name]
        argv = args(root)
        kept = _snapshot(root / "c") | _snapshot(root / "tok")
        code, out = _tier(root, *argv)
        assert code == pytest.ExitCode.USAGE_ERROR, out
        errors = [line for line in out.splitlines() if line.startswith("ERROR: ")]
        assert len(errors) == 1 and errors[0].startswith("ERROR: rlgate: "), out
        assert says in errors[0], out
        assert "passed" not in out and "error" not in out.replace("ERROR", ""), out
        assert _snapshot(root / "c") | _snapshot(root / "tok") == kept

    def test_rlgate_run_exits_2(self, tmp_path) -> None:
        root = _tier_tree(tmp_path)
        recipe = (root / "c" / "child.yaml").read_bytes()
        code, out = _tier(root, "--rlgate-recipe", "c/child.yaml", "--junitxml", "c/child.yaml",
                          rlgate_run=True)  # fmt: skip
        assert code == 2, out
        assert "ERROR: rlgate: refusing to write --junitxml c/child.yaml" in out
        assert (root / "c" / "child.yaml").read_bytes() == recipe

    def test_outputs_elsewhere_are_written(self, tmp_path) -> None:
        root = _tier_tree(tmp_path)
        code, out = _tier(root, "--rlgate-recipe", "c/child.yaml", "--rlgate-json", "out/gate.json",
                          "--junitxml", "out/tier.xml")  # fmt: skip
        assert code == 0, out
        doc = json.loads((root / "out" / "gate.json").read_text())
        assert doc["schema_version"] == 1 and doc["passed"] is True and doc["checks"], doc.keys()
        assert (root / "out" / "tier.xml").read_text().startswith("<?xml")
