#!/usr/bin/env bash
# Regenerate the schema fixtures of one Airflow version from Airflow itself.
# Usage: scripts/make_airflow_schema.sh [VERSION]  (default: each version in scripts/airflow_versions)
#
# Installs apache-airflow==VERSION into a throwaway virtualenv (not the dashboard's),
# runs `airflow db migrate` against a scratch PostgreSQL database and a scratch SQLite
# file, and writes their DDL to statestore_admin/airflow/fixtures/<major.minor>/{postgresql,sqlite}.sql.
# Tests and the embedded demo create the Airflow database from these files.
#
# Environment:
#   AIRFLOW_VENV   where the throwaway virtualenv goes (scripts/airflow_venv.sh says the default)
#   PGHOST PGPORT PGUSER   the scratch PostgreSQL server (default 127.0.0.1 5432 postgres)
#   OUT_DIR        where to write the fixtures (default: statestore_admin/airflow/fixtures/<major.minor>)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
if [ $# -eq 0 ]; then
  while read -r version; do bash "$0" "$version"; done <"$here/scripts/airflow_versions"
  exit 0
fi
AIRFLOW_VERSION=$1
venv=$(bash "$here/scripts/airflow_venv.sh" "$AIRFLOW_VERSION")
series=$(echo "$AIRFLOW_VERSION" | cut -d. -f1,2)
out=${OUT_DIR:-$here/statestore_admin/airflow/fixtures/$series}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
scratch_db=statestore_airflow_schema_scratch_$(echo "$AIRFLOW_VERSION" | tr -c "a-z0-9\n" _)
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
