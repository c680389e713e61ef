#!/usr/bin/env bash
# Nightly convergence job, called by ci/gitlab-ci.yml and ci/github-actions.yml alike:
#   1. `rlgate budget`: the nightly list must stay under its GPU-hour cap;
#   2. `rlgate launch` every run of the list (the short async SWE runs);
#   3. `rlgate watch` them all to their end (non-zero if one died or stopped short);
#   4. per run: `pytest -m "convergence or perf"` on its log dir, one evaluation of its checks
#      written twice: $REPORTS/<run>.xml (JUnit) and, with --rlgate-json, the `rlgate
#      check-run --json` document $REPORTS/<run>.check.json (for `rlgate report`).
# JUnit is written for every launched run, also when it died (its completion check errors).
# Exit 0 only when every run completed and every check passed.
#
# Environment (all optional except what the backend needs):
#   RLGATE_BACKEND         slurm (default) | ray | local
#   RLGATE_SITE            site config (slurm/ray: required), see ci/site.example.yaml
#   RLGATE_NEMO_RL_DIR     NeMo RL checkout (else nemo_rl_dir from the site config)
#   RLGATE_NIGHTLY         the run list (default ci/nightly.yaml)
#   RLGATE_RUNS_ROOT       parent of this night's run directories (default ./rlgate-runs)
#   RLGATE_REPORTS         output folder for JUnit/JSON (default reports/nightly)
#   RLGATE_BASELINES       folder with one earlier run per run name, for the perf tier
#   RLGATE_WATCH_INTERVAL  seconds between polls (default 300, as tools/launch's WATCH_INTERVAL)
#   RLGATE_TOKENIZERS      tokenizer root for the pre-launch `recipe check` gate
#   RLGATE_NO_CHECK=1      skip that gate
#   RLGATE_ENTRYPOINT      replaces NeMo RL's entry point, e.g. "python -m rlgate.testing.standin"
#                          for a GPU-free smoke test of the whole job
#   RLGATE_PYTHON          Python with rlgate installed (default .venv/bin/python)
#   RLGATE_PYTEST_ARGS     extra pytest arguments for step 4 (split on spaces, no quoting)
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${RLGATE_PYTHON:-.venv/bin/python}
RLGATE=("$PY" -m rlgate.cli)
BACKEND=${RLGATE_BACKEND:-slurm}
NIGHTLY=${RLGATE_NIGHTLY:-ci/nightly.yaml}
REPORTS=${RLGATE_REPORTS:-reports/nightly}
RUNS=${RLGATE_RUNS_ROOT:-rlgate-runs}/nightly-$(date -u +%Y%m%d-%H%M%S)
INTERVAL=${RLGATE_WATCH_INTERVAL:-300}
read -r -a pytest_extra <<<"${RLGATE_PYTEST_ARGS:-}"
mkdir -p "$REPORTS"

launch_args=(--backend "$BACKEND")
[[ -n ${RLGATE_SITE:-} ]] && launch_args+=(--site "$RLGATE_SITE")
[[ -n ${RLGATE_NEMO_RL_DIR:-} ]] && launch_args+=(--nemo-rl-dir "$RLGATE_NEMO_RL_DIR")
[[ -n ${RLGATE_ENTRYPOINT:-} ]] && launch_args+=(--entrypoint "$RLGATE_ENTRYPOINT")
[[ -n ${RLGATE_TOKENIZERS:-} ]] && launch_args+=(--tokenizers "$RLGATE_TOKENIZERS")
[[ ${RLGATE_NO_CHECK:-0} == 1 ]] && launch_args+=(--no-check)

# 1. budget (exit 1 over the cap: nothing is launched)
"${RLGATE[@]}" budget "$NIGHTLY"
table=$("${RLGATE[@]}" budget "$NIGHTLY" --list 2>/dev/null)

status=0
launched=()
# 2. launch
while IFS=$'\t' read -r name recipe steps per_run minutes baseline overrides; do
  read -r -a extra <<<"$overrides"
  if "${RLGATE[@]}" launch "$recipe" "${extra[@]}" "${launch_args[@]}" --steps "$steps" \
      --steps-per-run "$per_run" --minutes "$minutes" --run-dir "$RUNS/$name"; then
    launched+=("$RUNS/$name")
  else
    echo "nightly: launching $name failed" >&2
    status=1
  fi
done <<<"$table"
printf '%s\n' "${launched[@]}" >"$REPORTS/run_dirs.txt"

# 3. wait for every launched run
if ((${#launched[@]})); then
  "${RLGATE[@]}" watch --interval "$INTERVAL" "${launched[@]}" || status=1
fi

# 4. gate each run that was launched
while IFS=$'\t' read -r name recipe steps per_run minutes baseline overrides; do
  run="$RUNS/$name"
  [[ -f $run/rlgate_manifest.json ]] || continue
  mkdir -p "$run/logs"  # a run that died before logging still gets a JUnit file (an error)
  base=()
  if [[ $baseline != - ]]; then
    base=(--baseline "$baseline")
  elif [[ -n ${RLGATE_BASELINES:-} && -d $RLGATE_BASELINES/$name ]]; then
    base=(--baseline "$RLGATE_BASELINES/$name")
  fi
  "$PY" -m pytest tests/convergence tests/perf -m "convergence or perf" -p no:cacheprovider \
    --run-dir "$run/logs" --recipe "$recipe" --max-steps "$steps" "${base[@]}" \
    -o junit_suite_name="$name" --junitxml "$REPORTS/$name.xml" \
    --rlgate-json "$REPORTS/$name.check.json" "${pytest_extra[@]}" || status=1
done <<<"$table"

echo "nightly: runs in $RUNS, reports in $REPORTS, exit $status"
exit "$status"
