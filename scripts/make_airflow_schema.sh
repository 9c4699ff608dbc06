#!/usr/bin/env bash
# Regenerate the Airflow 3.3.2 schema fixtures from Airflow itself.
#
# Installs apache-airflow==3.3.2 into a throwaway virtualenv (not the dashboard's),
# runs `airflow db migrate` against a scratch PostgreSQL database and a scratch SQLite
# file, and writes their DDL to statestore_admin/airflow/schema/{postgresql,sqlite}.sql.
# Tests and the embedded demo create the Airflow database from these files.
#
# Environment:
#   AIRFLOW_VENV   where the throwaway virtualenv goes (scripts/airflow_venv.sh says the default)
#   PGHOST PGPORT PGUSER   the scratch PostgreSQL server (default 127.0.0.1 5432 postgres)
#   OUT_DIR        where to write the fixtures (default: statestore_admin/airflow/schema)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
AIRFLOW_VERSION=3.3.2
venv=$(bash "$here/scripts/airflow_venv.sh")
out=${OUT_DIR:-$here/statestore_admin/airflow/schema}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
scratch_db=statestore_airflow_schema_scratch
work=$(mktemp -d)
trap 'rm -rf "$work"; psql -qc "DROP DATABASE IF EXISTS $scratch_db" postgres >/dev/null 2>&1 || true' EXIT

export AIRFLOW_HOME=$work/airflow_home AIRFLOW__CORE__LOAD_EXAMPLES=False
unset AIRFLOW_CONFIG
mkdir -p "$AIRFLOW_HOME" "$out"

psql -qc "DROP DATABASE IF EXISTS $scratch_db" postgres
psql -qc "CREATE DATABASE $scratch_db" postgres
AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql+psycopg2://$PGUSER@$PGHOST:$PGPORT/$scratch_db" \
  "$venv/bin/airflow" db migrate >"$work/migrate-pg.log" 2>&1 || { cat "$work/migrate-pg.log"; exit 1; }
pg_dump --schema-only --no-owner --no-privileges --no-comments "$scratch_db" >"$work/pg.sql"

AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$work/airflow.db" \
  "$venv/bin/airflow" db migrate >"$work/migrate-sqlite.log" 2>&1 || { cat "$work/migrate-sqlite.log"; exit 1; }

"$venv/bin/python" "$here/scripts/schema_fixture.py" \
  --version "$AIRFLOW_VERSION" --postgres-dump "$work/pg.sql" --sqlite-db "$work/airflow.db" --out "$out"
echo "wrote $out/postgresql.sql and $out/sqlite.sql from apache-airflow==$AIRFLOW_VERSION"
