"""Chat templates: find the template vLLM will serve, render it, and probe what it does.

Invariant: every property reported here is *measured* by rendering the real template
with the real tokenizer (transformers' ``apply_chat_template``), never looked up in a
table of model names. The template checked is the one vLLM serves: the inline
``http_server_serving_chat_kwargs.chat_template`` when the config has one, else the
tokenizer's own.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from rlgate.core.errors import RecipeError
from rlgate.recipe.facts import RunFacts

__all__ = [
    "PROBE_TOOLS",
    "SERVING_KWARGS",
    "ChatTemplate",
    "TemplateProfile",
    "ThinkingMode",
    "ToolCallFormat",
    "load_tokenizer",
    "profile_template",
    "render",
    "resolve_tokenizer_source",
    "served_template",
    "tokenizer_folder",
    "tokenizer_model_id",
]

SERVING_KWARGS = "policy.generation.vllm_cfg.http_server_serving_chat_kwargs"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class ToolCallFormat(Enum):
    """How a template writes an assistant tool call."""

    JSON = "json"  # <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>  (hermes)
    XML = "xml"  # <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>...  (qwen3_coder)
    NONE = "none"  # the template does not render tool calls at all
    UNKNOWN = "unknown"


class ThinkingMode(Enum):
    """What the generation prompt leaves the model to do."""

    OPEN = "open"  # prompt ends inside <think>: the model reasons first
    CLOSED = "closed"  # prompt carries an empty <think></think>: thinking disabled
    NONE = "none"  # no think tags in the prompt


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """A chat template and where it came from."""

    text: str
    source: str

    @property
    def sha256(self) -> str:
        """Content hash, reported in JUnit and the release report."""
        return hashlib.sha256(self.text.encode()).hexdigest()


def tokenizer_model_id(facts: RunFacts) -> str:
    """The tokenizer a NeMo RL config loads (``policy.tokenizer.name`` or ``policy.model_name``)."""
    name = facts.policy.tokenizer_id
    if name is None:
        raise RecipeError("config names no tokenizer (policy.tokenizer.name / policy.model_name)")
    return name


def tokenizer_folder(model_id: str) -> str:
    """Folder name under a tokenizer root: the HF id's last component, lowercased."""
    return model_id.rstrip("/").split("/")[-1].lower()


def resolve_tokenizer_source(model_id: str, root: str | Path | None) -> str:
    """Return a local folder for ``model_id`` (from ``root``) or the id itself (HF cache/hub)."""
    if Path(model_id).is_dir():
        return model_id
    if root is not None:
        candidate = Path(root) / tokenizer_folder(model_id)
        if candidate.is_dir():
            return str(candidate)
    return model_id


@cache
def load_tokenizer(source: str) -> Any:
    """Load a transformers tokenizer from a folder or a hub id (cached per process)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source)
    except Exception as exc:  # an untrusted folder: transformers' refusals are of any type
        detail = (str(exc).splitlines() or [type(exc).__name__])[0].strip("'\"")
        raise RecipeError(
            f"cannot load tokenizer {source!r}: {type(exc).__name__}: {detail}",
            hint="point --tokenizers / RLGATE_TOKENIZERS at a folder with one subfolder per "
            "model (e.g. qwen3.5-35b-a3b/), or make the model available in the HF cache",
        ) from exc


def served_template(facts: RunFacts, tokenizer: Any) -> ChatTemplate:
    """The template vLLM's chat server will use for this config."""
    inline = facts.policy.generation.serving_kwargs.chat_template
    if inline is not None and inline.strip():
        if "{" not in inline and Path(inline).is_file():
            return ChatTemplate(Path(inline).read_text(encoding="utf-8"), f"file:{inline}")
        return ChatTemplate(inline, f"config:{SERVING_KWARGS}.chat_template")
    text = getattr(tokenizer, "chat_template", None)
    if not isinstance(text, str) or not text:
        raise RecipeError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template and the "
            f"config sets no {SERVING_KWARGS}.chat_template"
        )
    return ChatTemplate(text, f"tokenizer:{getattr(tokenizer, 'name_or_path', '?')}")


def render(
    tokenizer: Any,
    template: ChatTemplate,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
    **template_kwargs: Any,
) -> str:
    """Render ``messages`` with ``template`` exactly as transformers (and vLLM) do."""
    try:
        return tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=list(tools) if tools else None,
            chat_template=template.text,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **template_kwargs,
        )
    except Exception as exc:  # jinja raises TemplateError, TypeError, ...
        raise RecipeError(f"chat template ({template.source}) failed to render: {exc}") from exc


# --- probing -------------------------------------------------------------------

PROBE_TOOLS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": "rlgate_probe_tool",
            "description": "Probe tool used by rlgate to observe the template's tool-call format.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "a shell command"},
                    "count": {"type": "integer", "description": "a number"},
                },
                "required": ["command"],
            },
        },
    },
)
_PROBE_ARGS = {"command": "ls -la /testbed", "count": 3}
_PROBE_REASONING = "rlgate probe reasoning about the task."


def _probe_call(call_id: str = "call_rlgate_0") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "rlgate_probe_tool", "arguments": dict(_PROBE_ARGS)},
    }


@dataclass(frozen=True, slots=True)
class TemplateProfile:
    """What a template does, measured by rendering probe conversations."""

    tool_format: ToolCallFormat
    thinking: ThinkingMode
    generation_prompt: str
    keeps_reasoning_in_tool_loop: bool
    keeps_reasoning_after_new_user_turn: bool
    call_text: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able form for reports."""
        return {
            "tool_format": self.tool_format.value,
            "thinking": self.thinking.value,
            "generation_prompt": self.generation_prompt,
            "keeps_reasoning_in_tool_loop": self.keeps_reasoning_in_tool_loop,
            "keeps_reasoning_after_new_user_turn": self.keeps_reasoning_after_new_user_turn,
            "call_text": self.call_text,
        }


def _classify_call(text: str) -> ToolCallFormat:
    if "rlgate_probe_tool" not in text:
        return ToolCallFormat.NONE
    if re.search(r"<function=rlgate_probe_tool>", text):
        return ToolCallFormat.XML
    for match in re.finditer(r"\{.*\}", text, flags=re.DOTALL):
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("name") == "rlgate_probe_tool":
            return ToolCallFormat.JSON
    return ToolCallFormat.UNKNOWN


def _classify_thinking(generation_prompt: str) -> ThinkingMode:
    tail = generation_prompt.rstrip()
    if tail.endswith(THINK_OPEN):
        return ThinkingMode.OPEN
    if THINK_CLOSE in generation_prompt and tail.endswith(THINK_CLOSE):
        return ThinkingMode.CLOSED
    return ThinkingMode.NONE


def profile_template(
    tokenizer: Any, template: ChatTemplate, template_kwargs: Mapping[str, Any] | None = None
) -> TemplateProfile:
    """Render probe conversations and report the template's tool-call and thinking behaviour."""
    kwargs = dict(template_kwargs or {})
    user = {"role": "user", "content": "Fix the failing test in /testbed."}
    system = {"role": "system", "content": "You are a software engineering agent."}
    base = [system, user]
    prompt = render(tokenizer, template, base, PROBE_TOOLS, add_generation_prompt=True, **kwargs)
    before = render(tokenizer, template, base, PROBE_TOOLS, **kwargs)
    generation_prompt = prompt[len(before) :] if prompt.startswith(before) else prompt[-64:]
    assistant = {
        "role": "assistant",
        "content": "",
        "reasoning_content": _PROBE_REASONING,
        "tool_calls": [_probe_call()],
    }
    tool = {"role": "tool", "tool_call_id": "call_rlgate_0", "content": "README.md"}
    loop = render(tokenizer, template, [*base, assistant, tool], PROBE_TOOLS, **kwargs)
    call_text = loop[len(before) :] if loop.startswith(before) else loop
    nudge = {"role": "user", "content": "Please continue working on the task."}
    after_user = render(tokenizer, template, [*base, assistant, tool, nudge], PROBE_TOOLS, **kwargs)
    return TemplateProfile(
        tool_format=_classify_call(call_text),
        thinking=_classify_thinking(generation_prompt),
        generation_prompt=generation_prompt,
        keeps_reasoning_in_tool_loop=_PROBE_REASONING in loop,
        keeps_reasoning_after_new_user_turn=_PROBE_REASONING in after_user,
        call_text=call_text,
    )
