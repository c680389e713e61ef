"""Every tokenizer folder's own chat template, with the real tokenizer: what it renders.

Parametrized over the tokenizer root's subfolders x thinking on/off. These are the stock
templates users get from the hub; recipes may serve a different one (checked in
test_recipe_validation.py and test_contiguity.py).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from rlgate.core.observations import encode_observation, token_digest
from rlgate.serving.templates import (
    ChatTemplate,
    ThinkingMode,
    ToolCallFormat,
    load_tokenizer,
    profile_template,
    render,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
                "required": ["command"],
            },
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "You are a software engineering agent."},
    {"role": "user", "content": "Run the tests."},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "I will run pytest.",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {
                    "name": "run_shell",
                    "arguments": {"command": "pytest -q", "timeout": 60},
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "3 passed"},
]


def _stock(tokenizer_dir: Path):
    tok = load_tokenizer(str(tokenizer_dir))
    return tok, ChatTemplate(tok.chat_template, f"tokenizer:{tokenizer_dir.name}")


@pytest.mark.parametrize("thinking", [True, False], ids=["thinking_on", "thinking_off"])
class TestStockTemplate:
    def test_template_renders_a_full_agent_turn(self, tokenizer_dir, thinking, gate_record):
        tok, tpl = _stock(tokenizer_dir)
        text = render(
            tok, tpl, CONVERSATION, TOOLS, add_generation_prompt=True, enable_thinking=thinking
        )
        gate_record(template_sha256=tpl.sha256[:16], chars=len(text))
        ids = tok.encode(text, add_special_tokens=False)  # how vLLM tokenizes a chat prompt
        gate_record(observation=encode_observation({"prompt_ids": token_digest(ids)}))
        for needle in (
            "You are a software engineering agent.",
            "Run the tests.",
            "run_shell",
            "pytest -q",
            "3 passed",
        ):
            assert needle in text, f"{needle!r} missing from the rendered prompt"
        assert text.rstrip().endswith(("<|im_start|>assistant", "<think>", "</think>"))
        assert tok.eos_token in text, (
            "assistant turns must end with the EOS token the server stops on"
        )

    def test_template_writes_a_tool_call_format_a_parser_knows(
        self, tokenizer_dir, thinking, gate_record
    ):
        tok, tpl = _stock(tokenizer_dir)
        profile = profile_template(tok, tpl, {"enable_thinking": thinking})
        gate_record(tool_format=profile.tool_format.value, thinking=profile.thinking.value)
        assert profile.tool_format in (ToolCallFormat.XML, ToolCallFormat.JSON), profile.call_text

    def test_template_thinking_switch_is_measured(self, tokenizer_dir, thinking, gate_record):
        tok, tpl = _stock(tokenizer_dir)
        on = profile_template(tok, tpl, {"enable_thinking": True}).thinking
        off = profile_template(tok, tpl, {"enable_thinking": False}).thinking
        gate_record(on=on.value, off=off.value)
        # Either the template honours enable_thinking, or it ignores it entirely (always-thinking
        # Thinking-2507, never-thinking Instruct-2507/Coder): never half-way.
        assert (on, off) in {
            (ThinkingMode.OPEN, ThinkingMode.CLOSED),
            (ThinkingMode.OPEN, ThinkingMode.OPEN),
            (ThinkingMode.NONE, ThinkingMode.NONE),
        }


QWEN35 = "qwen3.5-35b-a3b"
# Texts with combining marks (Devanagari) exercise the pre-tokenizer regex difference.
TOKENIZATION_TEXTS = [
    "def add(a, b):\n    return a + b\n\n\n",
    "नमस्ते दुनिया",
    "किंतु यह स्पष्ट है",
    "Café — κόσμος 🚀",
    "<tool_call>\n<function=run_shell>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>",
]


@cache
def raw_tokenizer(path: str):
    """``tokenizers.Tokenizer.from_file`` once per file and process (Qwen3.5's: ~1 s)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


class TestTokenizerClass:
    def test_auto_tokenizer_matches_tokenizer_json(self, tokenizer_dir, request, gate_record):
        path = tokenizer_dir / "tokenizer.json"
        if not path.is_file():
            pytest.skip(f"{tokenizer_dir.name} ships vocab.json/merges.txt, no tokenizer.json")
        if tokenizer_dir.name == QWEN35:
            request.applymarker(
                pytest.mark.xfail(
                    strict=True,
                    reason="tokenizer_config.json names Qwen2Tokenizer; transformers' "
                    "Qwen2Tokenizer "
                    "re-installs the legacy Qwen2 pre-tokenizer regex (no \\p{M}), so "
                    "AutoTokenizer "
                    "splits combining-mark text differently from tokenizer.json. Qwen3_5Tokenizer "
                    "(see the next test) matches.",
                )
            )
        auto, raw = load_tokenizer(str(tokenizer_dir)), raw_tokenizer(str(path))
        gate_record(tokenizer_class=type(auto).__name__)
        bad = [
            t
            for t in TOKENIZATION_TEXTS
            if auto.encode(t, add_special_tokens=False)
            != raw.encode(t, add_special_tokens=False).ids
        ]
        assert not bad, f"{type(auto).__name__} differs from tokenizer.json on {bad}"

    def test_qwen35_tokenizer_class_matches_tokenizer_json_and_golden_ids(self, tokenizers_root):
        tokenizer_dir = tokenizers_root / QWEN35
        from transformers.models.qwen3_5 import Qwen3_5Tokenizer

        cls = Qwen3_5Tokenizer.from_pretrained(str(tokenizer_dir))
        raw = raw_tokenizer(str(tokenizer_dir / "tokenizer.json"))
        for text in TOKENIZATION_TEXTS:
            assert (
                cls.encode(text, add_special_tokens=False)
                == raw.encode(text, add_special_tokens=False).ids
            )
        golden = json.loads((tokenizer_dir.parent / "qwen3.5_golden_token_ids.json").read_text())
        for text, ids in golden["cases"]:
            assert cls.encode(text, add_special_tokens=False) == ids, text
