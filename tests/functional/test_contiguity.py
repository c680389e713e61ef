"""Multi-turn token-prefix contiguity through template, parsers and NeMo Gym (NeMo RL's contract).

NeMo RL trains on one token sequence per rollout and fails a rollout whose next prompt does
not start with the previous prompt + generated tokens ("Non-contiguous messages found!").
Each recipe replays agent-loop scenarios through its served template, tokenizer, vLLM
parsers and nemo-gym's Responses<->Chat code; a divergence fails with the exact tokens.
Limitations a recipe documents in ``rlgate.functional.known_limitations`` are strict xfails.
"""

from __future__ import annotations

import pytest

from rlgate.serving.contiguity import SCENARIOS, LoopContext, replay
from rlgate.serving.parsers import ServedParsers
from rlgate.serving.templates import ChatTemplate, load_tokenizer


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_prompt_extends_previous_prompt_and_generation(
    setup, scenario, known_limitation, gate_record
):
    if scenario not in setup.scenarios():
        pytest.skip(f"{scenario}: the served template does not think (no reasoning to be empty)")
    known_limitation("contiguity", scenario)
    result = setup.replay(scenario)
    gate_record(
        recipe=setup.recipe.name,
        scenario=scenario,
        turns=result.turns_checked,
        through_gym=setup.gym_model is not None,
        splice_restores=result.splice_restores,
    )
    assert not result.problems, "; ".join(result.problems)
    assert result.contiguous, result.divergence.describe()


def test_stock_qwen35_template_breaks_on_harness_user_message(tokenizers_root):
    """Why the Qwen3.5 recipes serve a thinking-preserving template.

    The stock Qwen3.5 template renders <think> only after the last user message: once the
    harness injects "please continue", earlier reasoning vanishes from the prompt. If this
    starts passing, the stock template changed and the recipes' template can be revisited.
    """
    tok = load_tokenizer(str(tokenizers_root / "qwen3.5-35b-a3b"))
    template = ChatTemplate(tok.chat_template, "tokenizer:qwen3.5-35b-a3b")
    kwargs = {"enable_thinking": True}
    ctx = LoopContext(tok, template, ServedParsers(tok, "qwen3_coder", "qwen3", kwargs), kwargs)
    assert replay(ctx, SCENARIOS["tool_loop"]).contiguous, "a plain tool loop stays append-only"
    broken = replay(ctx, SCENARIOS["user_nudge"])
    assert broken.divergence is not None
    assert "<think>" in broken.divergence.expected_text, broken.divergence.describe()
    assert "<think>" not in broken.divergence.actual_text, broken.divergence.describe()
