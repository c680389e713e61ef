#!/usr/bin/env bash
# Nightly upgrade canary, called by ci/gitlab-ci.yml and ci/github-actions.yml alike:
# `rlgate canary` against the newest vLLM on PyPI (and the newest transformers that release
# accepts: its own requires_dist, read from PyPI's JSON API by `python -m rlgate.canary.ci
# newest`), on the target and the reference recipe, compared with the pin. CPU only; needs
# ~10 GB free for uv's cache (the candidate environment hardlinks from it: keep UV_CACHE_DIR
# on the checkout's filesystem, or every build copies ~8 GB).
# Exit: rlgate canary's (0 no regression, 1 a regression, 2 bad input, 3 the candidate stack
# cannot be resolved or built: uv's message on one line).
#
# Environment (all optional except the tokenizers):
#   RLGATE_TOKENIZERS       tokenizer root (one folder per model), required
#   RLGATE_CANARY_WITH      the candidate instead of the newest, space-separated --with words:
#                           "vllm==0.30.0 transformers==5.12.0", a release candidate's wheel
#                           "vllm@/dl/vllm-0.34.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl" or a
#                           source checkout "vllm@/src/vllm" (paths without spaces)
#   RLGATE_CANARY_RECIPES   recipes to `recipe check` in both stacks (space-separated; default
#                           the target and the reference recipe)
#   RLGATE_CANARY_CACHE_DIR candidate environments (default .cache/rlgate-canary)
#   RLGATE_REPORTS          output folder (default reports/canary): canary.json, canary.xml,
#                           canary.txt (the table) and work/ (both stacks' JUnit, JSON, logs)
#   RLGATE_PYTHON           Python with rlgate installed (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${RLGATE_PYTHON:-.venv/bin/python}
RLGATE=("$PY" -m rlgate.cli)
REPORTS=${RLGATE_REPORTS:-reports/canary}
CACHE=${RLGATE_CANARY_CACHE_DIR:-.cache/rlgate-canary}
: "${RLGATE_TOKENIZERS:?set RLGATE_TOKENIZERS to the tokenizer root}"
if [ -n "${RLGATE_CANARY_WITH:-}" ]; then
  read -r -a moves <<<"$RLGATE_CANARY_WITH"
else
  mapfile -t moves < <("$PY" -m rlgate.canary.ci newest)
fi
[ ${#moves[@]} -gt 0 ] || { echo "ci/scripts/canary.sh: no candidate stack" >&2; exit 2; }
read -r -a recipes <<<"${RLGATE_CANARY_RECIPES:-recipes/grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml recipes/reference/grpo-qwen3.5-397ba17b-64n4g-megatron-async-r2egym-mlperf.yaml}"

args=()
for move in "${moves[@]}"; do args+=(--with "$move"); done
for recipe in "${recipes[@]}"; do args+=(--recipe "$recipe"); done
mkdir -p "$REPORTS"
echo "ci/scripts/canary.sh: rlgate canary ${args[*]}"
set +e
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
"${RLGATE[@]}" canary "${args[@]}" \
  --tokenizers "$RLGATE_TOKENIZERS" --cache-dir "$CACHE" --work-dir "$REPORTS/work" \
  --json "$REPORTS/canary.json" --junit "$REPORTS/canary.xml" | tee "$REPORTS/canary.txt"
code=${PIPESTATUS[0]}
exit "$code"
