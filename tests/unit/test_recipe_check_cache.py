"""``rlgate recipe check``'s cache of its vLLM / Gym / tokenizer checks (rlgate.checks.cache).

A warm run gives the cold run's verdict (and ``--no-cache``'s) without importing vLLM; every
key component changed is a miss; a corrupt, truncated, foreign or edited entry is ignored
and rebuilt with the same verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlgate.checks import cache as cache_mod
from rlgate.checks.cache import RecipeCheckCache, cache_key, default_cache_dir
from rlgate.checks.registry import load_recipe
from rlgate.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
TOKENIZERS = os.environ.get("RLGATE_TOKENIZERS", "/work/shared/tokenizers")
RECIPES = sorted(str(p) for p in (ROOT / "recipes").glob("*.yaml")) + sorted(
    str(p) for p in (ROOT / "recipes" / "known-bad").glob("*.yaml")
)
NOTHINK = str(
    ROOT / "recipes" / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-nothink.yaml"
)
SERVE = "policy.generation.vllm_cfg.http_server_serving_chat_kwargs"
BROKEN = [NOTHINK, f"{SERVE}.tool_parser=qwen3_codr"]  # unknown parser: vLLM's registry says

pytestmark = pytest.mark.skipif(
    not Path(TOKENIZERS, "qwen3.5-35b-a3b").is_dir(), reason="needs the shared tokenizers"
)


def _run(args: list[str], out: Path, *cache: str) -> tuple[int, dict[str, Any]]:
    code = main(
        ["recipe", "check", *args, "-q", "--tokenizers", TOKENIZERS, "--json", str(out), *cache]
    )
    return code, json.loads(out.read_text())


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One cold run over the recipes and one over a broken recipe, filling one cache."""
    tmp = tmp_path_factory.mktemp("cold")
    cache_dir = tmp / "cache"
    runs = {}
    for name, args in (("recipes", RECIPES), ("broken", BROKEN)):
        runs[name] = _run(args, tmp / f"{name}.json", "--cache-dir", str(cache_dir))
    return {"cache_dir": cache_dir, "runs": runs, "tmp": tmp}


@pytest.mark.parametrize("which", ["recipes", "broken"])
def test_warm_run_gives_the_cold_and_the_uncached_verdict(
    cold: dict[str, Any], which: str, tmp_path: Path
) -> None:
    args = RECIPES if which == "recipes" else BROKEN
    cold_code, cold_doc = cold["runs"][which]
    entries = sorted(p.name for p in (cold["cache_dir"] / "recipe-check").iterdir())
    warm = _run(args, tmp_path / "warm.json", "--cache-dir", str(cold["cache_dir"]))
    uncached = _run(args, tmp_path / "nocache.json", "--no-cache")
    assert warm == (cold_code, cold_doc)
    assert uncached == (cold_code, cold_doc)
    assert sorted(p.name for p in (cold["cache_dir"] / "recipe-check").iterdir()) == entries
    if which == "broken":  # vLLM's registry refused the parser: learned cold, kept warm
        assert cold_code == 1
        codes = [f["code"] for f in cold_doc["reports"][0]["findings"]]
        assert "unknown-parser" in codes


def test_warm_run_imports_neither_vllm_nor_torch_nor_scipy(
    cold: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "warm.json"
    args = ["recipe", "check", *RECIPES, "-q", "--tokenizers", TOKENIZERS, "--json", str(out)]
    args += ["--cache-dir", str(cold["cache_dir"])]
    script = (
        "import json, sys\n"
        "from rlgate.cli.app import main\n"
        f"code = main({args!r})\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'vllm', 'torch', 'transformers', 'nemo_gym', 'ray', 'scipy'})\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    cold_code, cold_doc = cold["runs"]["recipes"]
    assert result == {"code": cold_code, "heavy": []}
    assert json.loads(out.read_text()) == cold_doc


# --- the key ---------------------------------------------------------------------------


def _tokenizer_copy(tmp_path: Path) -> Path:
    root = tmp_path / "tokenizers"
    shutil.copytree(Path(TOKENIZERS, "qwen3.5-35b-a3b"), root / "qwen3.5-35b-a3b")
    return root


def _key(root: Path, *overrides: str) -> str:
    recipe = load_recipe(NOTHINK, list(overrides), strict=False)
    key = cache_key(recipe, root)
    assert key is not None
    return key


@pytest.mark.parametrize("dist", ["vllm", "transformers", "tokenizers", "nemo-gym", "python"])
def test_a_changed_version_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dist: str
) -> None:
    root = _tokenizer_copy(tmp_path)
    before = _key(root)
    from rlgate.core import versions

    real = versions.tested_versions

    monkeypatch.setattr(versions, "tested_versions", lambda: {**real(), dist: "0.0.0-other"})
    assert _key(root) != before


@pytest.mark.parametrize(
    "change",
    ["template", "tokenizer", "rule", "format", "config", "new-file"],
)
def test_each_key_component_changed_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    root = _tokenizer_copy(tmp_path)
    folder = root / "qwen3.5-35b-a3b"
    store = RecipeCheckCache(tmp_path / "cache")
    before = _key(root)
    store.store(before, cache_mod.CachedChecks(findings=[], checks=[]))
    assert store.load(before) is not None
    overrides: list[str] = []
    if change == "template":
        tpl = folder / "chat_template.jinja"
        tpl.write_text(tpl.read_text() + "\n")
    elif change == "tokenizer":
        tok = folder / "tokenizer.json"
        tok.write_bytes(tok.read_bytes() + b" ")  # one byte more, the same JSON
    elif change == "new-file":
        (folder / "special_tokens_map.json").write_text("{}")
    elif change == "rule":
        cache_mod.source_digest.cache_clear()
        monkeypatch.setattr(cache_mod, "source_digest", lambda: "0" * 64)
    elif change == "format":
        monkeypatch.setattr(cache_mod, "CACHE_FORMAT", cache_mod.CACHE_FORMAT + 1)
    elif change == "config":
        overrides = ["policy.generation.temperature=0.7"]
    after = _key(root, *overrides)
    assert after != before
    assert store.load(after) is None


def test_the_same_inputs_give_the_same_key(tmp_path: Path) -> None:
    root = _tokenizer_copy(tmp_path)
    assert _key(root) == _key(root)


def test_a_hub_tokenizer_is_not_cached(tmp_path: Path) -> None:
    recipe = load_recipe(NOTHINK, [], strict=False)
    assert cache_key(recipe, tmp_path / "empty") is None  # Qwen/... resolves to a hub id


def test_default_location_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "rlgate"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the spec says
    assert default_cache_dir() == Path.home() / ".cache" / "rlgate"


# --- untrusted entries -----------------------------------------------------------------


def _corrupt(entry: Path, other: Path, how: str) -> None:
    data = entry.read_bytes()
    doc = json.loads(data)
    if how == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        entry.write_bytes(b"\x00\xff not json")
    elif how == "empty":
        entry.write_bytes(b"")
    elif how == "foreign":  # another config's valid entry under this key's name
        entry.write_bytes(other.read_bytes())
    elif how == "tampered":  # a finding removed, digest left as it was
        doc["payload"]["findings"] = []
        doc["payload"]["checks"] = []
        entry.write_text(json.dumps(doc))
    elif how == "extra-field":
        doc["payload"]["exec"] = "__import__('os')"
        entry.write_text(json.dumps(doc))
    elif how == "wrong-types":
        doc["payload"]["findings"] = [{"code": 1, "severity": "fatal", "key": [], "message": {}}]
        entry.write_text(json.dumps(doc))
    elif how == "symlink":
        entry.unlink()
        entry.symlink_to(other)
    elif how == "directory":
        entry.unlink()
        entry.mkdir()


@pytest.mark.parametrize(
    "how",
    [
        "truncated",
        "garbage",
        "empty",
        "foreign",
        "tampered",
        "extra-field",
        "wrong-types",
        "symlink",
        "directory",
    ],
)
def test_a_bad_entry_is_ignored_and_rebuilt(cold: dict[str, Any], tmp_path: Path, how: str) -> None:
    cache_dir = tmp_path / "cache"
    shutil.copytree(cold["cache_dir"], cache_dir)
    recipe = load_recipe(BROKEN[0], BROKEN[1:], strict=False)
    key = cache_key(recipe, TOKENIZERS)
    entry = cache_dir / "recipe-check" / f"{key}.json"
    other = next(p for p in entry.parent.iterdir() if p != entry)
    assert entry.is_file()
    _corrupt(entry, other, how)
    assert RecipeCheckCache(cache_dir).load(key) is None
    code, doc = _run(BROKEN, tmp_path / "out.json", "--cache-dir", str(cache_dir))
    assert (code, doc) == cold["runs"]["broken"]
    if how == "directory":
        return  # cannot be replaced by a file; the verdict is still the cold one
    assert entry.is_file() and not entry.is_symlink()
    assert RecipeCheckCache(cache_dir).load(key) is not None  # rebuilt, valid again


# --- what is not stored, and where nothing is written --------------------------------------


def test_a_result_with_a_check_not_run_is_not_stored(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    args = [NOTHINK, "++policy.tokenizer.name=/nonexistent/tokenizer"]
    code, doc = _run(args, tmp_path / "out.json", "--cache-dir", str(cache_dir))
    assert code == 3 and doc["summary"]["incomplete"] == 1
    assert not list(cache_dir.rglob("*.json"))


def test_a_cache_dir_inside_an_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tokenizer_copy(tmp_path)
    inside = root / "qwen3.5-35b-a3b" / "cache"
    code = main(["recipe", "check", NOTHINK, "--tokenizers", str(root), "--cache-dir", str(inside)])
    assert code == 2
    assert capsys.readouterr().err.count("rlgate: error:") == 1
    assert not inside.exists()


def test_the_default_cache_is_never_written_into_an_input(
    cold: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _tokenizer_copy(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "qwen3.5-35b-a3b"))  # the default, in an input
    out = tmp_path / "out.json"
    code = main(["recipe", "check", *BROKEN, "-q", "--tokenizers", str(root), "--json", str(out)])
    assert code == cold["runs"]["broken"][0]
    assert not (root / "qwen3.5-35b-a3b" / "rlgate").exists()
