"""tools/gen_nemo_rl_schema.py on a small NeMo-RL-shaped tree: code reads, library-closed
subtrees, value types, free-form subtrees.

The tree is real Python source parsed by the generator; the "library" is a real unpacked
package folder with a ``.dist-info``, read the way megatron-core's wheel is.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    path = REPO / "tools" / "gen_nemo_rl_schema.py"
    spec = importlib.util.spec_from_file_location("gen_nemo_rl_schema_t", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "nemo-rl"
    _write(root, "nemo_rl/__init__.py", "")
    _write(
        root,
        "nemo_rl/models/generation/config.py",
        """\
        from typing import Any, Literal, NotRequired, TypedDict

        from pydantic import BaseModel, Field, PositiveInt


        class EngineCfg(TypedDict):
            max_len: int
            mode: NotRequired[Literal["fast", "slow"] | None]


        class GenerationConfig(TypedDict):
            backend: str
            engine_cfg: EngineCfg
            engine_kwargs: NotRequired[dict[str, Any]]
            env_vars: NotRequired[dict[str, str]]


        class FancyGenerationConfig(GenerationConfig):
            fancy_only: str


        class RefitConfig(BaseModel, extra="allow"):
            retries: PositiveInt = 3
            ratio: float = Field(default=0.5, gt=0, lt=1)
        """,
    )
    _write(
        root,
        "nemo_rl/models/generation/worker.py",
        """\
        from nemo_rl.models.generation.config import GenerationConfig


        class Worker:
            def __init__(self, config: GenerationConfig):
                self.cfg = config

            def start(self):
                engine = self.cfg["engine_cfg"]
                depth = engine.get("hidden_depth", 2)
                return depth, Engine(**self.cfg["engine_kwargs"])


        def helper(config):
            engine_cfg = config["engine_cfg"]
            if "approx_flag" in engine_cfg:
                return engine_cfg["approx_flag"]
            return config.get("unplaceable")
        """,
    )
    _write(
        root,
        "nemo_rl/algorithms/grpo.py",
        """\
        from typing import Any

        from pydantic import BaseModel

        from ..models.generation.config import GenerationConfig, RefitConfig


        class GRPOConfig(BaseModel, extra="allow"):
            max_num_steps: int = 10


        class MasterConfig(BaseModel, extra="allow"):
            grpo: GRPOConfig
            generation: GenerationConfig
            refit: RefitConfig
            env: dict[str, Any]
        """,
    )
    _write(
        root,
        "examples/configs/grpo_tiny.yaml",
        """\
        grpo: {max_num_steps: 3}
        generation:
          backend: x
          engine_cfg: {max_len: 8}
          engine_kwargs: {block: 16}
          env_vars: {ANY_NAME: "1"}
        """,
    )
    return root


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """An unpacked 'enginelib 1.2.3' whose EngineArgs receives generation.engine_kwargs."""
    root = tmp_path / "enginelib-wheel"
    _write(root, "enginelib-1.2.3.dist-info/METADATA", "Name: enginelib\nVersion: 1.2.3\n")
    _write(root, "enginelib/__init__.py", "from .args import EngineArgs\n")
    _write(
        root,
        "enginelib/base.py",
        """\
        from dataclasses import dataclass, field
        from typing import Literal


        @dataclass
        class BaseArgs:
            block: int = 16
            dtype: Literal["bf16", "fp16"] = "bf16"
            _internal: int = field(default=0, init=False)
        """,
    )
    _write(
        root,
        "enginelib/args.py",
        """\
        from dataclasses import dataclass
        from typing import Optional

        from enginelib.base import BaseArgs


        @dataclass
        class EngineArgs(BaseArgs):
            max_seqs: Optional[int] = None
            compile_config: dict = None
        """,
    )
    return root


def _build(gen: ModuleType, root: Path, **kwargs: Any) -> dict[str, Any]:
    return gen.build_schema(root, COMMIT, **kwargs)


class TestCodeReads:
    def test_read_through_annotated_self_attribute_is_exact(
        self, gen: ModuleType, tree: Path
    ) -> None:
        keys = _build(gen, tree)["keys"]
        entry = keys["generation.engine_cfg.hidden_depth"]
        assert entry["via"] == "code" and entry["read"] is True
        assert entry["where"].startswith("nemo_rl/models/generation/worker.py:start")

    def test_read_from_unannotated_config_is_approximate_and_anchored(
        self, gen: ModuleType, tree: Path
    ) -> None:
        keys = _build(gen, tree)["keys"]
        entry = keys["generation.engine_cfg.approx_flag"]
        assert entry["via"] == "code-approx"
        assert entry["where"].startswith("nemo_rl/models/generation/worker.py:helper")

    def test_single_key_read_from_unknown_root_is_not_placed(
        self, gen: ModuleType, tree: Path
    ) -> None:
        keys = _build(gen, tree)["keys"]
        assert not [k for k in keys if k.endswith("unplaceable")]


class TestClosedSubtrees:
    def test_library_fields_close_a_kwargs_subtree(
        self, gen: ModuleType, tree: Path, library: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        spec = gen.LibClass("enginelib", "enginelib", "EngineArgs", "worker.py:start")
        monkeypatch.setattr(gen, "LIBRARY_SUBTREES", {"generation.engine_kwargs": spec})
        schema = _build(gen, tree, libraries=[library])
        keys = schema["keys"]
        assert schema["closed"]["generation.engine_kwargs"] == {
            "by": "library",
            "source": "enginelib 1.2.3: enginelib/args.py:EngineArgs",
            "consumer": "worker.py:start",
        }
        assert schema["source"]["libraries"] == {"enginelib": "1.2.3"}
        assert keys["generation.engine_kwargs.block"]["where"] == (
            "enginelib 1.2.3 enginelib/base.py:BaseArgs"
        )
        assert keys["generation.engine_kwargs.dtype"]["enum"] == ["bf16", "fp16"]
        assert keys["generation.engine_kwargs.max_seqs"]["type"] == "int|null"
        assert "generation.engine_kwargs._internal" not in keys  # field(init=False)
        assert "generation.engine_kwargs.compile_config" in schema["open"]
        assert "generation.engine_kwargs" not in schema["open"]

    def test_without_the_library_the_subtree_is_closed_by_published_keys(
        self, gen: ModuleType, tree: Path
    ) -> None:
        schema = _build(gen, tree)
        assert schema["closed"]["generation.engine_kwargs"]["by"] == "examples"
        assert schema["keys"]["generation.engine_kwargs.block"]["declared"] is False

    def test_free_form_subtree_stays_open_with_its_reason(
        self, gen: ModuleType, tree: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        free = {"env.*": "environment configs", "generation.env_vars": "environment variables"}
        monkeypatch.setattr(gen, "FREE_FORM", free)
        schema = _build(gen, tree)
        assert schema["open"] == ["env.*", "generation.env_vars"]
        assert schema["open_why"]["generation.env_vars"] == "environment variables"
        assert "generation.env_vars.ANY_NAME" not in schema["keys"]


class TestValueTypes:
    def test_literal_bounds_and_startup_validation(self, gen: ModuleType, tree: Path) -> None:
        keys = _build(gen, tree)["keys"]
        mode = keys["generation.engine_cfg.mode"]
        assert mode["enum"] == ["fast", "slow"] and "null" in mode["type"].split("|")
        assert keys["refit.retries"]["bounds"]["gt"] == 0
        assert "RefitConfig" in keys["refit.retries"]["bounds"]["why"]
        assert {k: v for k, v in keys["refit.ratio"]["bounds"].items() if k != "why"} == {
            "gt": 0,
            "lt": 1,
        }
        assert keys["grpo.max_num_steps"]["validated"] is True
        assert keys["generation.backend"]["validated"] is True
        # A subclass variant's field: pydantic validates GenerationConfig only.
        assert "validated" not in keys["generation.fancy_only"]
