"""Packaging: every runtime import declared in the right extra; an install of one extra works.

* ``TestDeclaredImports`` (always): every third-party module imported anywhere in
  ``src/rlgate`` belongs to a distribution that ``pyproject.toml`` declares, directly, in
  the base dependencies or in an extra the importing layer needs (:data:`NEEDS`).
* ``TestLaunchOnlyEnvironment``: a virtualenv without system site packages that holds
  exactly rlgate and what ``pip install rlgate[launch]`` installs imports the launch
  commands and runs ``rlgate launch --backend ray --dry-run``. Two such environments:
  ``linked`` (always, seconds): the requirement closure resolved from this environment's
  installed metadata, each file of each distribution linked in; ``pypi`` (``slow``, opt-in
  with ``RLGATE_SLOW=1``: minutes, needs PyPI): ``pip install`` from PyPI, pinned by
  ``ci/constraints.txt``.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import rlgate
from rlgate.core.extras import OPTIONAL_MODULES
from rlgate.launch.site import SiteConfig

from .helpers import REPO_ROOT
from .helpers.launch_fixtures import ONE_NODE, STANDIN, TARGET, swe_env

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE = Path(rlgate.__file__).parent

#: The extras each part of rlgate needs beyond the base dependencies (longest prefix wins).
#: A module not listed needs only the base: it must import nothing else.
NEEDS: dict[str, tuple[str, ...]] = {
    "rlgate.serving": ("functional", "gym"),  # vLLM parsers, transformers, nemo-gym
    "rlgate.runs.rollouts": ("gym",),  # validates rollouts with nemo-gym's response model
    "rlgate.swe": ("swe",),  # swebench's harness and Docker; HF dataset names
    "rlgate.launch.ray_jobs": ("launch",),  # the Ray job API
    "rlgate.bench": ("functional", "gym"),  # the rollout path on the real stack
    "rlgate.testing": ("functional", "gym"),  # the corpus writes runs with torch's writer
    "rlgate.demo": ("functional", "gym"),  # the functional tier for real
    "rlgate.canary.env": ("canary",),  # uv resolves and builds the candidate environment
    "rlgate.history": ("history",),  # SQLAlchemy and Alembic (the store, its migrations)
}
#: Distributions no extra can declare, with why (checked to be still the case).
UNDECLARABLE: dict[str, str] = {
    "nemo-gym": "declares Requires-Python >=3.13.14, so pip refuses it as a dependency on "
    "3.11; ci/install.sh installs it alone with --no-deps --ignore-requires-python, and "
    "[gym] holds what the modules rlgate imports need",
    "apache-otava": "0.8.0 pins numpy 2.2.* and scipy<1.17 (this stack: numpy 2.3.5, scipy "
    "1.17.1) and pulls in BigQuery, Slack and pg8000 clients; ci/install.sh installs it alone "
    "with --no-deps, and otava.analysis needs only numpy and scipy",
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports in a module (at any depth: lazy ones too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"rlgate", "__future__"}


def _requirements(extras: Iterable[str]) -> dict[str, Requirement]:
    """The direct requirements of the base and ``extras`` (``rlgate[...]`` expanded)."""
    project = PYPROJECT["project"]
    optional = project["optional-dependencies"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in optional[extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == "rlgate":
                todo.extend(req.extras)
            else:
                reqs.append(req)
    return {canonicalize_name(r.name): r for r in reqs}


def _needs(module: str) -> tuple[str, ...]:
    prefixes = [p for p in NEEDS if module == p or module.startswith(p + ".")]
    return NEEDS[max(prefixes, key=len)] if prefixes else ()


class TestDeclaredImports:
    def test_every_third_party_import_is_declared_in_the_extra_its_layer_needs(self) -> None:
        distributions = md.packages_distributions()
        problems = []
        for path in sorted(PACKAGE.rglob("*.py")):
            module = _module_name(path)
            extras = _needs(module)
            declared = _requirements(extras)
            for name in sorted(_imports(path)):
                dists = {canonicalize_name(d) for d in distributions.get(name, ())}
                if not dists:
                    problems.append(f"{module}: imports {name}, which no installed package has")
                elif not dists & (declared.keys() | UNDECLARABLE.keys()):
                    where = "the base dependencies" + "".join(f" + [{e}]" for e in extras)
                    problems.append(f"{module}: imports {name} ({', '.join(sorted(dists))}), "
                                    f"not declared in {where}")  # fmt: skip
        assert not problems, "\n".join(problems)

    def test_every_optional_import_names_its_extra_for_the_cli(self) -> None:
        """Each import beyond the base is in core.extras' table, with the extra declaring it."""
        distributions = md.packages_distributions()
        base = _requirements(())
        optional = {
            name
            for path in PACKAGE.rglob("*.py")
            for name in _imports(path)
            if not {canonicalize_name(d) for d in distributions.get(name, ())} & base.keys()
        }
        assert optional == set(OPTIONAL_MODULES)
        for module, extra in OPTIONAL_MODULES.items():
            dists = {canonicalize_name(d) for d in distributions[module]}
            assert dists & (_requirements((extra,)).keys() | UNDECLARABLE.keys()), module

    def test_the_check_sees_an_undeclared_import(self, tmp_path: Path) -> None:
        """The scan finds imports at any depth (a lazy import inside a function too)."""
        module = tmp_path / "m.py"
        module.write_text("import os\n\ndef f():\n    import ray.job_submission\n")
        assert _imports(module) == {"ray"}
        assert "ray" not in _requirements(()) and "ray" in _requirements(("launch",))

    def test_every_extra_named_exists_and_the_undeclarable_are_really_so(self) -> None:
        extras = PYPROJECT["project"]["optional-dependencies"]
        assert {e for needed in NEEDS.values() for e in needed} <= extras.keys()
        for name in UNDECLARABLE:
            meta = md.metadata(name)
            assert meta["Requires-Python"] and not sys.version_info >= (3, 13, 14), meta
            assert name not in _requirements(extras)


# --- an environment with only rlgate[launch] ---------------------------------------------------


def _closure(requirements: Iterable[Requirement]) -> dict[str, md.Distribution]:
    """The installed distributions ``pip install`` of ``requirements`` brings, transitively."""
    found: dict[str, md.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo = [(r, "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        dist = found.setdefault(name, md.distribution(name))
        for wanted in ("", *sorted(req.extras)):
            if (name, wanted) in done:
                continue
            done.add((name, wanted))
            todo.extend((Requirement(r), wanted) for r in dist.requires or ())
    return found


def _launch_only_env(root: Path) -> Path:
    """A virtualenv holding rlgate (this checkout) plus exactly [launch]'s closure."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next((root / "lib").glob("python3*/site-packages"))
    closure = _closure(_requirements(("launch",)).values())
    assert {"ray", "pydantic"} <= closure.keys()
    assert not {"vllm", "swebench", "torch", "transformers"} & closure.keys()
    for dist in closure.values():
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # scripts in bin/, bytecode
            target = site / file
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(dist.locate_file(file))
    (site / "rlgate").symlink_to(PACKAGE, target_is_directory=True)
    return root / "bin" / "python"


def _pypi_env(root: Path) -> Path:
    """A virtualenv from scratch with ``pip install rlgate[launch]`` (PyPI, pinned versions)."""
    source = root.parent / "source"  # pip builds in the source tree: a copy, not the checkout
    skip = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*cache")
    shutil.copytree(REPO_ROOT, source, symlinks=True, ignore=skip)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = root / "bin" / "python"
    constraints = REPO_ROOT / "ci" / "constraints.txt"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-c", str(constraints), f"{source}[launch]"],
        check=True, timeout=1800,
    )  # fmt: skip
    return python


SLOW = pytest.mark.skipif(not os.environ.get("RLGATE_SLOW"), reason="opt-in: set RLGATE_SLOW=1")


class TestLaunchOnlyEnvironment:
    @pytest.fixture(
        scope="class",
        params=[
            pytest.param(_launch_only_env, id="linked"),
            pytest.param(_pypi_env, id="pypi", marks=[pytest.mark.slow, SLOW]),
        ],
    )
    def python(self, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
        return request.param(tmp_path_factory.mktemp("launch-only") / "venv")

    def _run(self, python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return subprocess.run(
            [str(python), *args], cwd=cwd, env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    def test_it_has_only_the_extra(self, python: Path, tmp_path: Path) -> None:
        absent = "('vllm', 'swebench', 'torch', 'transformers')"
        code = f"import importlib.util as u; print([m for m in {absent} if u.find_spec(m)])"
        proc = self._run(python, "-c", code, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr

    def test_the_launch_commands_import_and_answer(self, python: Path, tmp_path: Path) -> None:
        modules = ["rlgate.cli.app", "rlgate.cli.runs", "ray.job_submission"] + [
            f"rlgate.launch.{p.stem}" for p in sorted((PACKAGE / "launch").glob("[a-z]*.py"))
        ]
        proc = self._run(python, "-c", "; ".join(f"import {m}" for m in modules), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        for command in ("launch", "watch", "budget"):
            proc = self._run(python, "-m", "rlgate.cli", command, "--help", cwd=tmp_path)
            assert proc.returncode == 0 and f"usage: rlgate {command}" in proc.stdout, proc.stderr

    def test_a_ray_launch_dry_run_works(self, python: Path, tmp_path: Path) -> None:
        """Planning reads the recipe and applies NeMo RL overrides (hydra) before rendering."""
        site = tmp_path / "site.yaml"
        site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
        argv = ["-m", "rlgate.cli", "launch", str(TARGET), *ONE_NODE, "--backend", "ray"]
        argv += ["--site", str(site), "--ray-address", "http://127.0.0.1:8265"]
        argv += ["--entrypoint", " ".join(STANDIN)]
        argv += ["--run-dir", str(tmp_path / "dry"), "--dry-run", "--no-check"]
        proc = self._run(python, *argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert '"address": "http://127.0.0.1:8265"' in proc.stdout
        assert "rlgate dry run, nothing submitted" in proc.stdout

    @pytest.mark.parametrize(
        ("argv", "module", "extra"),
        [
            (["recipe", "check", str(TARGET)], "vllm", "functional"),
            (
                ["launch", str(TARGET), *ONE_NODE, "--backend", "ray", "--dry-run"],
                "vllm",
                "functional",
            ),
            (["report", "--demo"], "torch", "functional"),
        ],
        ids=["recipe_check", "launch_gate", "demo"],
    )
    def test_a_command_needing_another_extra_says_which_exit_3(
        self, python: Path, tmp_path: Path, argv: list[str], module: str, extra: str
    ) -> None:
        if argv[0] == "report":
            argv = [*argv, "--out", str(tmp_path / "demo")]
        if argv[0] == "launch":
            site = tmp_path / "site.yaml"
            site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
            argv = [*argv, "--site", str(site), "--run-dir", str(tmp_path / "run")]
            argv += ["--entrypoint", " ".join(STANDIN), "--ray-address", "http://127.0.0.1:8265"]
        proc = self._run(python, "-m", "rlgate.cli", *argv, cwd=tmp_path)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.startswith(
            f"rlgate: error: this needs the Python module {module!r}, which is not installed\n"
            f"  hint: pip install 'rlgate[{extra}]'"
        ), proc.stderr
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
