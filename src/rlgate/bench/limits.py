"""Upper bounds of the rollout-path bench's work, one definition for the CLI and the library.

``rlgate bench rollout`` re-renders and re-tokenizes a whole conversation per model call, so
its CPU time grows with the square of the turns (200 turns: 31 CPU-s per full pass here,
docs/rollout-path.md) and linearly with the repeats and the parser-output lengths. A count
beyond these is a typo, not a measurement; it is refused before anything runs (exit 2):

* :data:`MAX_TURNS` model calls per trajectory (``--turns``, and a recipe's
  ``agent_max_turns`` when ``--turns`` is not given): 5x the long recipes' 200, about 25x
  their CPU time (some 13 CPU-minutes per full pass);
* :data:`MAX_REPEATS` timed passes (``--repeats``);
* :data:`MAX_PARSER_TOKENS` tokens per parser output (``--parser-lengths``): 256k, Qwen3.5's
  context; at most :data:`MAX_PARSER_LENGTHS` lengths.
"""

from __future__ import annotations

__all__ = ["MAX_PARSER_LENGTHS", "MAX_PARSER_TOKENS", "MAX_REPEATS", "MAX_TURNS"]

MAX_TURNS = 1_000
MAX_REPEATS = 20
MAX_PARSER_TOKENS = 262_144
MAX_PARSER_LENGTHS = 8
