"""vLLM's real tool-call and reasoning parsers, wired the way vLLM's chat server wires them.

vLLM (0.25) composes the ``--tool-call-parser`` and ``--reasoning-parser`` into one
``Parser`` (``vllm.parser.ParserManager.get_parser``), constructs it per request with
the effective ``chat_template_kwargs`` and calls ``parse`` (non-streaming) or
``parse_delta`` (streaming). :class:`ServedParsers` does exactly that, so a
parse here is the parse the server would do. This is the only module that
imports vLLM, and it does so lazily.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from rlgate.core.errors import RecipeError
from rlgate.core.noise import quiet_third_party

__all__ = [
    "ParsedCall",
    "ParsedOutput",
    "ServedParsers",
    "engine_arg_names",
    "normalize_tool_call_arguments",
    "reasoning_parser_names",
    "serving_chat_parameters",
    "template_content_format",
    "template_variables",
    "tool_parser_names",
]

log = logging.getLogger(__name__)


def _import_vllm() -> None:
    # vLLM installs its own log handlers unless told not to; let pytest/the CLI own logging.
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    quiet_third_party()  # torch's "No CUDA runtime is found" at import (rlgate.core.noise)


@cache
def tool_parser_names() -> tuple[str, ...]:
    """Names registered in vLLM's ``ToolParserManager``."""
    _import_vllm()
    from vllm.tool_parsers import ToolParserManager

    return tuple(sorted(ToolParserManager.list_registered()))


@cache
def reasoning_parser_names() -> tuple[str, ...]:
    """Names registered in vLLM's ``ReasoningParserManager``."""
    _import_vllm()
    from vllm.reasoning import ReasoningParserManager

    return tuple(sorted(ReasoningParserManager.list_registered()))


@cache
def engine_arg_names() -> tuple[str, ...]:
    """Fields of vLLM's ``AsyncEngineArgs``: what NeMo RL's ``vllm_kwargs`` may hold."""
    _import_vllm()
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    return tuple(sorted(f.name for f in dataclasses.fields(AsyncEngineArgs)))


def _check_name(kind: str, name: str, known: Sequence[str]) -> None:
    if name in known:
        return
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {' or '.join(close)}?" if close else f"registered: {', '.join(known)}"
    raise RecipeError(f"unknown {kind} parser {name!r} in vLLM's registry", hint=hint)


_SERVED_TOKENIZERS: dict[int, tuple[Any, Any]] = {}


def served_tokenizer(tokenizer: Any) -> Any:
    """VLLM's cached proxy of a transformers tokenizer (what its server hands the parsers)."""
    key = id(tokenizer)
    if key not in _SERVED_TOKENIZERS:
        _import_vllm()
        from vllm.tokenizers.hf import get_cached_tokenizer

        _SERVED_TOKENIZERS[key] = (tokenizer, get_cached_tokenizer(tokenizer))
    return _SERVED_TOKENIZERS[key][1]


# --- vLLM's chat-serving behaviour around the parsers --------------------------------


@cache
def serving_chat_parameters() -> frozenset[str]:
    """Parameters vLLM's ``OpenAIServingChat`` accepts (NeMo RL splats the serving kwargs in)."""
    _import_vllm()
    import inspect

    from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat

    owned = {"self", "engine_client", "models", "online_renderer"}  # NeMo RL passes these itself
    return frozenset(set(inspect.signature(OpenAIServingChat.__init__).parameters) - owned)


def template_variables(template_text: str) -> frozenset[str]:
    """Variables a chat template reads; vLLM passes only these of ``chat_template_kwargs``."""
    _import_vllm()
    from vllm.renderers.hf import _cached_resolve_chat_template_kwargs

    return frozenset(_cached_resolve_chat_template_kwargs(template_text))


def template_content_format(template_text: str) -> str:
    """``"string"`` or ``"openai"``: how vLLM hands message content to this template."""
    _import_vllm()
    from vllm.renderers.hf import _detect_content_format

    return _detect_content_format(template_text, default="string")


def normalize_tool_call_arguments(messages: list[dict[str, Any]]) -> None:
    """VLLM's own post-processing of chat messages (JSON tool-call arguments -> dicts), in place."""
    _import_vllm()
    from vllm.entrypoints.chat_utils import _postprocess_messages

    _postprocess_messages(messages)


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call as the server returns it (arguments decoded from JSON)."""

    name: str
    arguments: Any
    raw_arguments: str


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """What the chat server returns for one generation."""

    reasoning: str | None
    content: str | None
    calls: tuple[ParsedCall, ...]


def _decode_args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return raw  # surfaced as a string so a test can show the malformed arguments


class ServedParsers:
    """The tool + reasoning parser pair of one served model.

    Args:
        tokenizer: the served tokenizer (a transformers tokenizer).
        tool_parser: ``tool_parser`` of the serving kwargs (None: no tool parsing).
        reasoning_parser: ``reasoning_parser`` of the serving kwargs (None or "": none).
        chat_template_kwargs: the effective kwargs (server defaults merged with request's),
            e.g. ``{"enable_thinking": False}``; the reasoning parser reads them.
        enable_auto_tools: ``enable_auto_tools`` (NeMo RL's server defaults it to True).
    """

    def __init__(
        self,
        tokenizer: Any,
        tool_parser: str | None,
        reasoning_parser: str | None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        enable_auto_tools: bool = True,
    ) -> None:
        _import_vllm()
        from vllm.parser import ParserManager

        if tool_parser:
            _check_name("tool", tool_parser, tool_parser_names())
        if reasoning_parser:
            _check_name("reasoning", reasoning_parser, reasoning_parser_names())
        self.tokenizer = served_tokenizer(tokenizer)
        self.tool_parser = tool_parser or None
        self.reasoning_parser = reasoning_parser or None
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.enable_auto_tools = enable_auto_tools
        self._parser_cls = ParserManager.get_parser(
            tool_parser_name=self.tool_parser,
            reasoning_parser_name=self.reasoning_parser,
            enable_auto_tools=enable_auto_tools,
        )

    def _request(self, tools: Sequence[Mapping[str, Any]] | None) -> Any:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        return ChatCompletionRequest(
            model="rlgate",
            messages=[{"role": "user", "content": "."}],
            tools=list(tools) if tools else None,
            chat_template_kwargs=self.chat_template_kwargs or None,
        )

    def _new_parser(self, request: Any) -> Any:
        return self._parser_cls(
            self.tokenizer, request.tools, chat_template_kwargs=self.chat_template_kwargs
        )

    def parse(
        self,
        text: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        token_ids: Sequence[int] = (),
    ) -> ParsedOutput:
        """Parse a complete generation as ``/v1/chat/completions`` does (non-streaming)."""
        if self._parser_cls is None:
            return ParsedOutput(None, text, ())
        request = self._request(tools)
        parser = self._new_parser(request)
        reasoning, content, calls = parser.parse(
            text,
            request,
            enable_auto_tools=self.enable_auto_tools,
            model_output_token_ids=token_ids,
        )
        parsed = tuple(
            ParsedCall(c.name, _decode_args(c.arguments), c.arguments or "") for c in calls or ()
        )
        if not (request.tools and self.enable_auto_tools and self.tool_parser):
            parsed = ()
        return ParsedOutput(reasoning, content, parsed)

    def parse_streaming(
        self,
        token_ids: Sequence[int],
        tools: Sequence[Mapping[str, Any]] | None = None,
        prompt_token_ids: Sequence[int] | None = None,
    ) -> ParsedOutput:
        """Feed ``token_ids`` one token at a time through ``parse_delta`` and merge the deltas."""
        request = self._request(tools)
        if self._parser_cls is None:
            text = self.tokenizer.decode(list(token_ids))
            return ParsedOutput(None, text, ())
        parser = self._new_parser(request)
        reasoning: list[str] = []
        content: list[str] = []
        names: dict[int, str] = {}
        args: dict[int, list[str]] = {}
        # Incremental detokenization as vLLM does it (prefix/read offsets): O(n), and an
        # incomplete UTF-8 sequence is held back until the next token completes it.
        # A generation that ends on the EOS is stop-terminated: vLLM's detokenizer
        # (IncrementalDetokenizer.update) leaves that token out of the text, while the
        # parser still receives its id in delta_token_ids.
        ids = list(token_ids)
        eos_id = getattr(self.tokenizer, "eos_token_id", None)
        prefix_offset = read_offset = 0
        for i, tid in enumerate(ids):
            last = i == len(ids) - 1
            prefix_text = self.tokenizer.decode(ids[prefix_offset:read_offset])
            new_text = self.tokenizer.decode(ids[prefix_offset : i + 1])
            if last and eos_id is not None and tid == eos_id:
                delta = ""
            elif len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
                delta = new_text[len(prefix_text) :]
                prefix_offset, read_offset = read_offset, i + 1
            else:
                delta = ""
            msg = parser.parse_delta(
                delta_text=delta,
                delta_token_ids=[tid],
                request=request,
                prompt_token_ids=list(prompt_token_ids or []),
                finished=last,
            )
            if msg is None:
                continue
            if msg.reasoning:
                reasoning.append(msg.reasoning)
            if msg.content:
                content.append(msg.content)
            for call in msg.tool_calls or ():
                if call.function is None:
                    continue
                if call.function.name:
                    names[call.index] = call.function.name
                if call.function.arguments:
                    args.setdefault(call.index, []).append(call.function.arguments)
        calls = tuple(
            ParsedCall(names[i], _decode_args("".join(args.get(i, []))), "".join(args.get(i, [])))
            for i in sorted(names)
        )
        return ParsedOutput(
            "".join(reasoning) if reasoning else None, "".join(content) if content else None, calls
        )
