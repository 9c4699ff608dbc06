#!/usr/bin/env bash
# Make (once) a throwaway virtualenv with apache-airflow==3.3.2, separate from the dashboard's, and
# print its path. Reused across runs: ${AIRFLOW_VENV:-~/.cache/statestore-admin/airflow-3.3.2-venv}.
set -euo pipefail
AIRFLOW_VERSION=3.3.2
venv=${AIRFLOW_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/statestore-admin/airflow-$AIRFLOW_VERSION-venv}
if [ ! -x "$venv/bin/airflow" ] || ! "$venv/bin/python" -c "import airflow, sys; sys.exit(airflow.__version__ != '$AIRFLOW_VERSION')" 2>/dev/null; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "apache-airflow==$AIRFLOW_VERSION" psycopg2-binary asyncpg >&2
fi
echo "$venv"
