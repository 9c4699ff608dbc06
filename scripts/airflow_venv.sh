#!/usr/bin/env bash
# Make (once) a throwaway virtualenv with one Airflow version, separate from the dashboard's, and print
# its path. Usage: scripts/airflow_venv.sh [VERSION]; VERSION defaults to the oldest supported one.
# The supported versions are pinned in scripts/airflow_versions (one line each: moving a pin is a
# one-line change). Reused across runs: ${AIRFLOW_VENV:-~/.cache/statestore-admin/airflow-VERSION-venv}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
AIRFLOW_VERSION=${1:-$(head -n1 "$here/airflow_versions")}
venv=${AIRFLOW_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/statestore-admin/airflow-$AIRFLOW_VERSION-venv}
if [ ! -x "$venv/bin/airflow" ] || ! "$venv/bin/python" -c "import airflow, sys; sys.exit(airflow.__version__ != '$AIRFLOW_VERSION')" 2>/dev/null; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "apache-airflow==$AIRFLOW_VERSION" psycopg2-binary asyncpg >&2
fi
echo "$venv"
