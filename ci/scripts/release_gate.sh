#!/usr/bin/env bash
# Release-gate job, called by ci/gitlab-ci.yml and ci/github-actions.yml alike: every tier,
# the SWE-bench Verified gate, then the go/no-go report.
#   1. functional tier (every recipe)                 -> $REPORTS/functional.xml
#   2. convergence + perf on fresh runs of the list   -> ci/scripts/nightly_convergence.sh
#   3. SWE gate: `rlgate swe eval` per predictions file (one per model and seed), or per
#      model with N seeds on a Docker-less cluster (RLGATE_SWE_BACKEND=gym|nemo-skills),
#      then `rlgate swe compare`                      -> $REPORTS/swe.json, swe.xml
#   4. `rlgate report` over all of it                 -> $REPORTS/report/
# Every step runs even when an earlier one failed, so the report shows all of the evidence;
# the exit status is non-zero when any step failed (the report's verdict says which).
#
# Environment, besides nightly_convergence.sh's (RLGATE_BACKEND, RLGATE_SITE, ...):
#   RLGATE_RELEASE_LIST    runs to launch (default ci/nightly.yaml)
#   RLGATE_SWE_BEFORE      predictions JSONL files of the base model, space-separated (seeds)
#   RLGATE_SWE_AFTER       predictions JSONL files of the trained model, space-separated
#   RLGATE_SWE_DATASET     SWE-bench Verified: parquet, folder or HF name (the universe)
#   RLGATE_SWE_WORKERS     harness workers (default 8)
#   RLGATE_SWE_MODAL=1     evaluate on Modal instead of the local Docker daemon
#   RLGATE_SWE_BACKEND     docker (default: the predictions above) | gym | nemo-skills; then
#     RLGATE_SWE_BEFORE / RLGATE_SWE_AFTER are the two models (served name or checkpoint) and
#     RLGATE_SWE_SEEDS     seeds per model (default 4)
#     RLGATE_SWE_BEFORE_URL, RLGATE_SWE_AFTER_URL  their vLLM servers (gym: required;
#                          nemo-skills: without them ns eval hosts the checkpoint itself)
#     RLGATE_SWE_GYM_INPUT, RLGATE_SWE_SIF  gym: Gym-format Verified rows, .sif template
#     RLGATE_SWE_LAUNCH    gym: slurm | ray | local submits each model's collection as one job
#                          through rlgate's launcher (RLGATE_SITE, RLGATE_NEMO_RL_DIR,
#                          RLGATE_SWE_NODES), then `rlgate watch`es it to its end; unset: the
#                          commands run in this job (inside an allocation)
#     RLGATE_SWE_CLUSTER   nemo-skills: the cluster config ns eval submits through (its jobs
#                          run on Slurm after this script: rerun it to compare; finished
#                          seeds are not submitted again)
#   RLGATE_REPORT_RECIPE   recipe named in the report's sentence (default: the list's first)
#   RLGATE_REPORTS         output folder (default reports/release)
#   RLGATE_TOKENIZERS      tokenizer root for the functional tier (required)
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${RLGATE_PYTHON:-.venv/bin/python}
RLGATE=("$PY" -m rlgate.cli)
REPORTS=${RLGATE_REPORTS:-reports/release}
LIST=${RLGATE_RELEASE_LIST:-ci/nightly.yaml}
: "${RLGATE_TOKENIZERS:?set RLGATE_TOKENIZERS to the tokenizer root (functional tier)}"
: "${RLGATE_SWE_BEFORE:?set RLGATE_SWE_BEFORE to the base model's predictions file(s)}"
: "${RLGATE_SWE_AFTER:?set RLGATE_SWE_AFTER to the trained model's predictions file(s)}"
: "${RLGATE_SWE_DATASET:?set RLGATE_SWE_DATASET to SWE-bench Verified (parquet, dir or HF name)}"
mkdir -p "$REPORTS"
status=0

# 1. functional tier (rlgate's own unit tests run in its CI, .ci/run, not here)
"$PY" -m pytest tests/functional -m functional -p no:cacheprovider \
  --tokenizers "$RLGATE_TOKENIZERS" --junitxml "$REPORTS/functional.xml" || status=1

# 2. convergence + perf on fresh runs
RLGATE_NIGHTLY=$LIST RLGATE_REPORTS="$REPORTS/convergence" RLGATE_PYTHON=$PY \
  ci/scripts/nightly_convergence.sh || status=1

# 3. SWE gate: one fresh run id per predictions file (the harness reuses reports by run id)
stamp=$(date -u +%Y%m%d-%H%M%S)
swe_args=(--dataset "$RLGATE_SWE_DATASET" --max-workers "${RLGATE_SWE_WORKERS:-8}")
[[ ${RLGATE_SWE_MODAL:-0} == 1 ]] && swe_args+=(--modal)
evaluate() {  # arm, predictions... -> prints the run dirs
  local arm=$1 i=0 preds
  shift
  for preds in "$@"; do
    local run_id="$arm-s$i-$stamp"
    "${RLGATE[@]}" swe eval --predictions "$preds" --run-id "$run_id" "${swe_args[@]}" \
      --run-dir "$REPORTS/swe_runs/$run_id" >&2 || return 1
    echo "$REPORTS/swe_runs/$run_id"
    i=$((i + 1))
  done
}
cluster_evaluate() {  # arm, model, server url -> prints what swe compare reads
  local arm=$1 model=$2 url=$3 out="$REPORTS/swe_runs/$1"
  local args=(--backend "$RLGATE_SWE_BACKEND" --model "$model" --output-dir "$out"
    --seeds "${RLGATE_SWE_SEEDS:-4}" --dataset "$RLGATE_SWE_DATASET")
  [[ -n $url ]] && args+=(--server-url "$url")
  if [[ $RLGATE_SWE_BACKEND == gym ]]; then
    args+=(--gym-input "$RLGATE_SWE_GYM_INPUT" --container-formatter "$RLGATE_SWE_SIF")
    if [[ -n ${RLGATE_SWE_LAUNCH:-} ]]; then  # one job through rlgate's launcher, watched
      local run_dir="$REPORTS/swe_launch/$arm-$stamp"
      "${RLGATE[@]}" swe eval "${args[@]}" --launch "$RLGATE_SWE_LAUNCH" --run-dir "$run_dir" \
        --nodes "${RLGATE_SWE_NODES:-1}" >&2 || return 1
      if [[ -f $run_dir/rlgate_manifest.json ]]; then  # else nothing was left to run
        "${RLGATE[@]}" watch "$run_dir" --interval "${RLGATE_WATCH_INTERVAL:-300}" >&2 ||
          return 1
      fi
    else
      "${RLGATE[@]}" swe eval "${args[@]}" >&2 || return 1
    fi
    echo "$out/rollouts.jsonl"
  else
    "${RLGATE[@]}" swe eval "${args[@]}" --cluster "$RLGATE_SWE_CLUSTER" >&2 || return 1
    echo "$out"
  fi
}
read -r -a before_preds <<<"$RLGATE_SWE_BEFORE"
read -r -a after_preds <<<"$RLGATE_SWE_AFTER"
swe_json=()
if [[ ${RLGATE_SWE_BACKEND:-docker} != docker ]]; then
  evaluate() {  # arm, model
    local url_var="RLGATE_SWE_${1^^}_URL"
    cluster_evaluate "$1" "$2" "${!url_var:-}"
  }
fi
if before=$(evaluate before "${before_preds[@]}") && after=$(evaluate after "${after_preds[@]}"); then
  mapfile -t before_runs <<<"$before"
  mapfile -t after_runs <<<"$after"
  "${RLGATE[@]}" swe compare --before "${before_runs[@]}" --after "${after_runs[@]}" \
    --dataset "$RLGATE_SWE_DATASET" --json "$REPORTS/swe.json" --junit "$REPORTS/swe.xml" ||
    status=1
  [[ -f $REPORTS/swe.json ]] && swe_json=(--swe "$REPORTS/swe.json")
else
  echo "release: SWE-bench evaluation failed; the report will be INCOMPLETE" >&2
  status=1
fi

# 4. the report (verdict GO / NO-GO / INCOMPLETE)
recipe=${RLGATE_REPORT_RECIPE:-$("${RLGATE[@]}" budget "$LIST" --list 2>/dev/null | head -1 | cut -f2)}
shopt -s nullglob
junit=("$REPORTS"/*.xml "$REPORTS"/convergence/*.xml)
runs=("$REPORTS"/convergence/*.check.json)
run_args=()
((${#runs[@]})) && run_args=(--run "${runs[@]}")
"${RLGATE[@]}" report --junit "${junit[@]}" "${run_args[@]}" "${swe_json[@]}" \
  --recipe "$recipe" --out "$REPORTS/report" || status=1

echo "release: reports in $REPORTS (report: $REPORTS/report/report.md), exit $status"
exit "$status"
