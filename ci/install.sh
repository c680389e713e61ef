#!/usr/bin/env bash
# Install rlgate and its pinned test stack into ./.venv on a fresh machine (Python >= 3.11).
#   ci/install.sh            # creates .venv, installs everything pinned by ci/constraints.txt
#   RLGATE_CANARY=1 ci/install.sh   # also builds the CI canary's environment (.ci/run sets it)
# Re-running is safe: pip skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${RLGATE_VENV:-.venv}

# System packages the test suite needs: Chromium renders report.html in the report's browser
# test; PostgreSQL's server binaries let the history tests start a real server in a temporary
# directory. Installed with apt where we are root; otherwise say which packages to install.
need=()
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null \
  || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q && apt-get install -y -q --no-install-recommends "${need[@]}"
  else
    echo "ci/install.sh: the test suite needs the system packages: ${need[*]}" \
      "(Debian/Ubuntu: sudo apt-get install ${need[*]}); install them and re-run" >&2
    exit 2
  fi
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

"${PIP[@]}" install -q --upgrade "pip>=24"
"${PIP[@]}" install -q -c ci/constraints.txt -e ".[all]"
# nemo-gym 0.7.0 declares Requires-Python >=3.13.14 but runs on 3.11. --ignore-requires-python
# applies to every package of a pip command, so nemo-gym is installed alone, without its
# dependency tree; the modules rlgate imports need only what the [gym] extra installed above.
"${PIP[@]}" install -q -c ci/constraints.txt --no-deps --ignore-requires-python nemo-gym==0.7.0
# apache-otava 0.8.0 (history changes: E-Divisive) pins numpy 2.2.* and scipy<1.17 and pulls
# in BigQuery, Slack and pg8000 clients; otava.analysis needs only numpy and scipy (installed).
"${PIP[@]}" install -q -c ci/constraints.txt --no-deps apache-otava==0.8.0
# pytest's JUnit schema (junit-10.xsd) ships in pytest's sdist, not its wheel: the report tests
# validate merged JUnit against it. Fetched from PyPI at install time, never committed.
XSD_DIR="$VENV/share/rlgate"
if [ ! -f "$XSD_DIR/junit-10.xsd" ]; then
  PYTEST_VERSION=$("$VENV/bin/python" -c 'import pytest; print(pytest.__version__)')
  XSD_TMP=$(mktemp -d)
  "${PIP[@]}" download -q --no-deps --no-binary :all: "pytest==$PYTEST_VERSION" -d "$XSD_TMP"
  tar -xzf "$XSD_TMP/pytest-$PYTEST_VERSION.tar.gz" -C "$XSD_TMP" \
    "pytest-$PYTEST_VERSION/testing/example_scripts/junit-10.xsd"
  mkdir -p "$XSD_DIR"
  mv "$XSD_TMP/pytest-$PYTEST_VERSION/testing/example_scripts/junit-10.xsd" "$XSD_DIR/"
  rm -rf "$XSD_TMP"
fi
# The CI canary (tests/unit/test_canary_e2e.py, docs/canary.md): RLGATE_CANARY=1 resolves and
# builds the candidate environment for vllm==0.26.0 once, with uv (the [canary] extra), into
# .cache/rlgate-canary, and writes its install record there last; the test finds it by that
# path and FAILS if a requested environment is missing or broken. RLGATE_CANARY=0 records
# "not requested" (the test skips, saying so); unset leaves any earlier record as it is.
case "${RLGATE_CANARY:-}" in
  1) "$VENV/bin/python" -m rlgate.canary.ci prepare ;;
  0) "$VENV/bin/python" -m rlgate.canary.ci prepare --off ;;
  "") ;;
  *) echo "ci/install.sh: RLGATE_CANARY must be 0 or 1, not '$RLGATE_CANARY'" >&2; exit 2 ;;
esac
"$VENV/bin/rlgate" versions
