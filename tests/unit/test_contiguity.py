"""rlgate.serving.contiguity: the pure pieces (NeMo RL's EOS-count splice, divergence reporting)."""

from __future__ import annotations

from rlgate.serving.contiguity import SCENARIOS, splice_prefix

EOS = 2


class TestSplicePrefix:
    def test_nemo_rl_docstring_example(self):
        # replace_prefix_tokens' own example: the template re-tokenized " 4" as 1001.
        model_prefix = [11, 12, 13, 40, 41, 220, 17, 2]
        template_prefix = [11, 12, 13, 40, 41, 1001, 2]
        template = [11, 12, 13, 40, 41, 1001, 2, 21, 22, 40, 41]
        assert splice_prefix(EOS, model_prefix, template_prefix, template) == [
            11, 12, 13, 40, 41, 220, 17, 2, 21, 22, 40, 41,
        ]  # fmt: skip

    def test_generation_cut_by_max_tokens_still_splices(self):
        assert splice_prefix(EOS, [1, 5, 6], [1, 7, 2], [1, 7, 2, 9]) == [1, 5, 6, 2, 9]

    def test_missing_eos_boundary_returns_none(self):
        assert splice_prefix(EOS, [1, 2], [1, 2, 3, 2], [1, 2, 3]) is None


class TestScenarios:
    def test_scenarios_cover_the_agent_loop_shapes(self):
        assert set(SCENARIOS) == {"tool_loop", "user_nudge", "parallel_calls", "empty_reasoning"}
        assert any(t.user_after for t in SCENARIOS["user_nudge"].turns)
        assert len(SCENARIOS["parallel_calls"].turns[0].calls) == 2
        assert SCENARIOS["empty_reasoning"].turns[0].reasoning == ""
