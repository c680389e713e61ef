"""The model's own ``config.json``: found offline, read safely, validated for what rules need.

``recipe check``'s model-decidable rules (:mod:`rlgate.checks.startup.model`) need a few
fields of the Hugging Face config of ``policy.model_name`` (heads, layers, experts, the
maximum length). :func:`find_model_config` looks for it, offline only, where the tokenizer
is looked for (:func:`~rlgate.serving.templates.resolve_tokenizer_source`): ``model_name``
itself when it is a folder, the tokenizer root's folder of that model (``--tokenizers`` /
``RLGATE_TOKENIZERS``), then the Hugging Face cache (``huggingface_hub``'s cache layout,
never the network). :func:`load_model_config` reads it through ``core.io``'s safe reader and
validates the fields with pydantic (a wrong type is one ``rlgate: error`` naming the file).

No transformers ``AutoConfig``: a field the file does not write is absent (``None``), not
transformers' class default, so a rule says nothing about it. Multimodal configs that nest
the language model under ``text_config`` (Qwen3.5, Gemma3) are read as vLLM's
``get_hf_text_config`` does: the text fields from ``text_config``.

What vLLM's model registry knows of an architecture (pipeline parallelism, multimodality) is
read from ``rlgate/data/vllm_architectures.json`` (:func:`vllm_architecture`), a table
``tools/vllm_architectures.py`` writes from the installed vLLM: ``recipe check`` does not
import vLLM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from rlgate.core.errors import RecipeError
from rlgate.core.io import read_json, require_regular_file
from rlgate.core.resources import DATA
from rlgate.core.validate import problems
from rlgate.serving.templates import tokenizer_folder

__all__ = [
    "ModelConfig",
    "TextConfig",
    "VllmArchitecture",
    "find_model_config",
    "load_model_config",
    "transformers_default_experts",
    "vllm_architecture",
]

MAX_CONFIG_BYTES = 4 * 2**20  # a model's config.json is a few KB

# vLLM 0.25.1 transformers_utils/model_arch_config_convertor.py::get_num_experts
EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
# ... and ::derive_max_model_len_and_key (the smallest of those present wins)
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


class TextConfig(BaseModel):
    """The language model's fields the rules read (``text_config`` when nested)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model_type: StrictStr | None = None
    num_hidden_layers: StrictInt | None = None
    num_attention_heads: StrictInt | None = None
    num_key_value_heads: StrictInt | None = None
    max_position_embeddings: StrictInt | None = None
    num_experts: StrictInt | list[StrictInt] | None = None
    num_local_experts: StrictInt | None = None
    n_routed_experts: StrictInt | None = None
    moe_num_experts: StrictInt | None = None
    rope_scaling: dict[str, Any] | None = None
    rope_parameters: dict[str, Any] | None = None
    block_configs: list[Any] | None = None

    def extra(self, key: str) -> Any:
        """A field outside the typed ones (``None`` when absent)."""
        return (self.model_extra or {}).get(key)


class _File(TextConfig):
    architectures: list[StrictStr] | None = None
    text_config: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """A model's ``config.json``: where it was found, its top level and its text model."""

    path: str
    model_type: str | None
    architectures: tuple[str, ...]
    text: TextConfig
    quantized: bool  # writes a quantization_config (NeMo RL's vllm_worker tests its presence)
    quant_method: str | None = None  # its quantization_config's quant_method

    @property
    def experts(self) -> int | None:
        """The routed experts (vLLM's ``get_num_experts``); 0 for a dense model, None unknown.

        A key the file leaves out holds its transformers config class's default in the object
        vLLM reads (``qwen3_moe`` without ``num_experts``: 128), so with no expert key the
        model type decides (:func:`transformers_default_experts`): dense only for a type
        whose defaults hold no expert, and the file has no NemotronH ``block_configs`` and no
        Dbrx ``ffn_config``; unknown for a type transformers does not know here.
        """
        for key in EXPERT_KEYS:
            value = getattr(self.text, key)
            if isinstance(value, list):
                value = value[0] if value else None
            if isinstance(value, int):
                return value
        if self.text.block_configs is not None or self.text.extra("ffn_config") is not None:
            return None
        return transformers_default_experts(self.text.model_type or self.model_type)

    def max_len(self) -> tuple[float, str | None]:
        """The maximum length vLLM derives, and the key it comes from (inf when none is written).

        ``derive_max_model_len_and_key`` then the RoPE scaling of ``_get_and_verify_max_len``
        (``vllm/config/model.py``).
        """
        derived, key = float("inf"), None
        for name in MAX_LEN_KEYS:
            value = getattr(self.text, name, None) or self.text.extra(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                if value < derived:
                    key = name
                derived = min(derived, value)
        if isinstance(mml := self.text.extra("model_max_length"), int | float) and mml:
            derived, key = mml, "model_max_length"
        if derived == float("inf"):
            return derived, None
        rope = self.text.rope_parameters or self.text.rope_scaling
        if rope and not ({"rope_type", "type", "factor"} & set(rope)):
            rope = {k: v for k, v in rope.items() if isinstance(v, dict)}  # per layer type
        elif rope:
            rope = {"": rope}
        if rope and "gemma3" not in (self.text.model_type or self.model_type or ""):
            factor: Any = 1.0
            for rp in rope.values():
                kind = rp.get("rope_type", rp.get("type"))
                if kind not in ("su", "longrope", "llama3"):
                    factor = rp.get("factor", factor)
                    if kind == "yarn" and isinstance(
                        rp.get("original_max_position_embeddings"), int
                    ):
                        derived = rp["original_max_position_embeddings"]
            derived *= factor if isinstance(factor, int | float) and factor else 1.0
        return derived, key


def load_model_config(path: str | Path) -> ModelConfig:
    """Read and validate one ``config.json`` (exit 2 naming the file when it is not one)."""
    file = Path(path)
    require_regular_file(file, "model config", MAX_CONFIG_BYTES)
    raw = read_json(file, what="model config", error=RecipeError)
    if not isinstance(raw, dict):
        raise RecipeError(f"{file}: model config is not a JSON object")
    try:
        top = _File.model_validate(raw)
        text = TextConfig.model_validate(top.text_config) if top.text_config else top
    except ValidationError as exc:
        raise RecipeError(f"{file}: model config: {problems(exc)}") from exc
    quant = raw.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    return ModelConfig(
        str(file),
        top.model_type,
        tuple(top.architectures or ()),
        text,
        "quantization_config" in raw,
        method if isinstance(method, str) else None,
    )


@dataclass(frozen=True, slots=True)
class VllmArchitecture:
    """One architecture of vLLM's model registry, as ``_ModelInfo`` records it."""

    name: str
    pp: bool  # ModelRegistry.is_pp_supported_model: the class implements SupportsPP
    multimodal: bool  # ModelRegistry.is_multimodal_model: vLLM builds a multimodal_config
    vllm: str  # the vLLM version the table was written from


@cache
def _vllm_table() -> dict[str, object]:
    table = json.loads((DATA / "vllm_architectures.json").read_text())
    return table if isinstance(table, dict) else {}


@cache
def _expert_defaults() -> dict[str, Any]:
    table = json.loads((DATA / "transformers_expert_defaults.json").read_text())
    return table if isinstance(table, dict) else {}


def transformers_default_experts(model_type: str | None) -> int | None:
    """The experts transformers' config class of ``model_type`` gives by default (0: dense).

    From ``rlgate/data/transformers_expert_defaults.json`` (``tools/
    transformers_expert_defaults.py``, the installed transformers); None for a type not in
    it (unknown here: a newer model, remote code).
    """
    table = _expert_defaults()
    moe, dense = table.get("moe") or {}, table.get("dense") or []
    if model_type in moe and type(moe[model_type]) is int:
        return moe[model_type]
    return 0 if model_type in dense else None


def vllm_architecture(architectures: tuple[str, ...] | list[str]) -> VllmArchitecture | None:
    """The registry entry vLLM resolves ``architectures`` to, or None when it is not known.

    As ``_ModelRegistry.inspect_model_cls`` with ``model_impl`` auto, for the first
    architecture (the one a ``config.json`` names; vLLM would go on to the next only when the
    registry lacks it). None when the table lacks it (vLLM may then map it to a base
    architecture, ``_normalize_arch``, or try its Transformers backend) or when its class could
    not be inspected where the table was written.
    """
    table = _vllm_table()
    known = table.get("architectures")
    if not architectures or not isinstance(known, dict):
        return None
    info = known.get(architectures[0])
    if not isinstance(info, dict):
        return None
    pp, mm = info.get("pp"), info.get("multimodal")
    return VllmArchitecture(architectures[0], pp is True, mm is True, str(table.get("vllm")))


def _hf_cache(model_id: str) -> str | None:
    """``config.json`` of ``model_id`` in the Hugging Face cache, offline (None if not there)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    try:
        found = try_to_load_from_cache(model_id, "config.json")
    except (ValueError, OSError):  # not a repo id (HFValidationError is a ValueError)
        return None
    return found if isinstance(found, str) else None


def find_model_config(model_id: str, tokenizer_root: str | Path | None) -> tuple[str | None, str]:
    """Where ``model_id``'s ``config.json`` is (or None), and where it was looked for."""
    looked = []
    candidates = []
    if Path(model_id).is_dir():
        candidates.append(Path(model_id) / "config.json")
    if tokenizer_root is not None:
        candidates.append(Path(tokenizer_root) / tokenizer_folder(model_id) / "config.json")
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate), str(candidate)
        looked.append(str(candidate))
    found = _hf_cache(model_id)
    looked.append("the Hugging Face cache")
    return found, ", ".join(looked)
