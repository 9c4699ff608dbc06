"""The Airflow 3.4 deployment's shape: every run's dynamic regions, task instances, keys and loop decisions.

Rows are shaped as Airflow 3.4.0b2 writes them for the DAG the compat stage runs (``tests/compat/dags34/``) and
the demo loads (``statestore_admin/demo/regions.py``), multiplied set-based in SQL. Every DAG has, per run:

- ``extract``, ``transform``, ``load`` (5 keys each) and ``publish`` (2 keys) outside any region (the sentinel
  region, index -1);
- ``refine``, a task group looped 3 times: a ``dynamic_region`` for the loop; in it, per iteration ``i``, the gate
  ``refine.gate`` (a ``LoopGateOperator`` recording its decision reason as the ``_airflow_loop_decision_reason``
  XCom) and ``refine.step`` (3 keys) at region_index ``i``; and ``refine.work``, mapped over 2 items, whose
  expansion is a region of its own under the loop at index ``i`` (``path``: the loop's family root and ``i``
  big-endian), its 2 task instances at region_index 0 and 1 (2 keys each), so that the iterations' rows differ
  only in region_id;
- ``per_table``, a task group mapped over 4 tables: one region, ``per_table.load`` at region_index 0 to 3
  (3 keys each).

That is 50 keys, 20 task instances and 5 regions a run. The DAG ``ml_refine_long`` has one run whose loop ran
``LONG_LOOP`` iterations, every one keyed (3,500 keys). Region and task instance ids are time-ordered, as
Airflow's uuid7 ids are, from the row's time and a digest of its coordinates, so that a gate's XCom finds its
task instance without reading it back. Expiries, value sizes and times follow the 3.3 deployment's rules. The
serialized DAG is Airflow's own: 3.4.0b2's ``DagSerialization`` of ``bench/dags34/bench_regions.py`` (this
shape as a DAG), run in its virtualenv (``scripts/airflow_venv.sh``), stored under each DAG's id.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AIRFLOW_VERSION = "3.4.0b2"
SENTINEL = "00000000-0000-0000-0000-000000000000"
ITERATIONS = 3
LONG_LOOP = 500
LONG_LOOP_DAG = "ml_refine_long"

# (task_id, operator, where, indexes, keys); where: "top" (no region), "loop" (the loop's region at the
# iteration), "expansion" (the iteration's expansion of a mapped task), "group" (the mapped group's region).
TASKS = [
    ("extract", "S3ListOperator", "top", [-1], ["watermark", "cursor", "source_manifest", "rows_read", "last_success"]),
    (
        "transform",
        "SparkSubmitOperator",
        "top",
        [-1],
        ["checkpoint", "spark_job_id", "partition_cursor", "rows_written", "schema_hash"],
    ),
    ("refine.gate", "LoopGateOperator", "loop", [None], []),
    ("refine.step", "PythonOperator", "loop", [None], ["checkpoint", "rows_seen", "last_batch"]),
    ("refine.work", "PythonOperator", "expansion", [0, 1], ["cursor", "offset"]),
    ("per_table.load", "SQLExecuteQueryOperator", "group", [0, 1, 2, 3], ["rows_loaded", "watermark", "schema_hash"]),
    (
        "load",
        "SQLExecuteQueryOperator",
        "top",
        [-1],
        ["watermark", "batch_id", "rows_loaded", "target_snapshot", "done"],
    ),
    ("publish", "HttpOperator", "top", [-1], ["notification_id", "last_success"]),
]


def _per_run(where: str, per_iteration: int) -> int:
    return ITERATIONS * per_iteration if where in ("loop", "expansion") else per_iteration


KEYS_PER_RUN = sum(_per_run(w, len(i) * len(k)) for _, _, w, i, k in TASKS)
TIS_PER_RUN = sum(_per_run(w, len(i)) for _, _, w, i, _ in TASKS)
REGIONS_PER_RUN = 1 + ITERATIONS + 1
assert (KEYS_PER_RUN, TIS_PER_RUN) == (50, 20)

SHAPE = [
    "CREATE TEMP TABLE bench_ti (ord int, task_id text, operator text, place text, idx int)",
    "CREATE TEMP TABLE bench_key (ord int, task_id text, place text, idx int, key text)",
    # A time-ordered id (uuid7's layout: 48 bits of milliseconds, version 7, variant 8) from a time and a seed.
    """CREATE FUNCTION pg_temp.bench_uuid(at timestamptz, seed text) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
        SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7'
                || substr(md5(seed), 1, 3) || '8' || substr(md5(seed), 4, 15))::uuid $$""",
    # A run's loop region, iteration i's expansion, and the mapped group's region.
    """CREATE FUNCTION pg_temp.bench_region(run int, start timestamptz, place text, i int) RETURNS uuid
        LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE place
            WHEN 'top' THEN '00000000-0000-0000-0000-000000000000'::uuid
            WHEN 'loop' THEN pg_temp.bench_uuid(start + interval '2 minutes', run || '/loop')
            WHEN 'expansion' THEN pg_temp.bench_uuid(start + (3 + 5 * i) * interval '1 minute', run || '/work/' || i)
            ELSE pg_temp.bench_uuid(start + interval '20 minutes', run || '/group') END $$""",
]


def shape_rows() -> tuple[list, list]:
    """The rows of ``bench_ti`` (ord, task_id, operator, place, idx) and ``bench_key`` (ord, task_id, place,
    idx, key); ``idx`` None in the loop's region means "the iteration"."""
    tis, keys = [], []
    for task_id, operator, place, indexes, names in TASKS:
        for idx in indexes:
            tis.append((len(tis), task_id, operator, place, idx))
            for key in names:
                keys.append((len(keys), task_id, place, idx, key))
    return tis, keys


def iterations(run: str) -> str:
    """How many iterations the loop of the run ``run`` (an alias of dag_run) ran."""
    return f"CASE WHEN {run}.dag_id = '{LONG_LOOP_DAG}' THEN {LONG_LOOP} ELSE {ITERATIONS} END"


SERIALIZE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bench_regions", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from airflow.serialization.serialized_objects import DagSerialization
print(json.dumps(DagSerialization.to_dict(module.loop.dag)))
"""


def serialized_dag_document() -> dict:
    """What Airflow 3.4.0b2's ``DagSerialization`` writes for ``bench/dags34/bench_regions.py``, this shape as a
    DAG (the loop's gate, the mapped task and group as Airflow records them), in its own virtualenv."""
    venv = subprocess.run(
        ["bash", str(ROOT / "scripts" / "airflow_venv.sh"), AIRFLOW_VERSION], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="ssbench-serialize-") as home:
        done = subprocess.run(
            [f"{venv}/bin/python", "-c", SERIALIZE, str(ROOT / "bench" / "dags34" / "bench_regions.py")],
            env={"PATH": os.environ["PATH"], "HOME": home, "AIRFLOW_HOME": home},
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


def serialized_dag(document: dict, dag_id: str) -> str:
    """``document`` (``serialized_dag_document()``) as the serialized DAG of ``dag_id``."""
    return json.dumps({**document, "dag": {**document["dag"], "dag_id": dag_id}})


# The regions of the runs with ids in [first, last]: the loop, one expansion per iteration, the mapped group.
REGIONS = f"""
INSERT INTO dynamic_region (id, dag_id, run_id, node_id, parent_region_id, parent_region_index,
                            forked_from_region_id, family_root_id, path, resumes_from_index, slot_key, created_at)
SELECT r.id, dr.dag_id, dr.run_id, r.node_id, r.parent_id, r.parent_index, NULL, r.id,
       CASE WHEN r.parent_id IS NULL THEN ''::bytea
            ELSE decode(replace(r.parent_id::text, '-', ''), 'hex') || int4send(r.parent_index) END,
       0, NULL, r.created_at
FROM dag_run AS dr
CROSS JOIN LATERAL (
    SELECT pg_temp.bench_region(dr.id, dr.start_date, 'loop', 0) AS id, 'refine' AS node_id, NULL::uuid AS parent_id,
           NULL::int AS parent_index, dr.start_date + interval '2 minutes' AS created_at
    UNION ALL
    SELECT pg_temp.bench_region(dr.id, dr.start_date, 'expansion', i), 'refine.work',
           pg_temp.bench_region(dr.id, dr.start_date, 'loop', 0), i, dr.start_date + (3 + 5 * i) * interval '1 minute'
    FROM generate_series(0, {iterations("dr")} - 1) AS i
    UNION ALL
    SELECT pg_temp.bench_region(dr.id, dr.start_date, 'group', 0), 'per_table', NULL, NULL,
           dr.start_date + interval '20 minutes'
) r
WHERE dr.id BETWEEN %(first)s AND %(last)s
ORDER BY dr.id, r.created_at
"""

# Each task instance of those runs at its coordinates: (region, index) from its place and the iteration.
_COORDINATES = f"""
FROM dag_run AS dr
CROSS JOIN {{shape}} AS t
CROSS JOIN LATERAL generate_series(0, CASE WHEN t.place IN ('loop', 'expansion')
                                           THEN {iterations("dr")} - 1 ELSE 0 END) AS i
CROSS JOIN LATERAL (
    SELECT pg_temp.bench_region(dr.id, dr.start_date, t.place, i) AS region_id,
           CASE WHEN t.place = 'loop' THEN i ELSE t.idx END AS region_index,
           dr.start_date + CASE WHEN t.place IN ('loop', 'expansion') THEN (3 + 5 * i) * interval '1 minute'
                                WHEN t.place = 'group' THEN interval '20 minutes'
                                ELSE t.ord * interval '1 minute' END AS ti_start
) c
"""

TASK_INSTANCES = (
    """
INSERT INTO task_instance (id, task_id, dag_id, run_id, region_index, region_id, start_date, end_date, duration, state,
                           try_number, max_tries, hostname, unixname, pool, pool_slots, queue, priority_weight,
                           operator, queued_dttm, scheduled_dttm, executor, updated_at, rendered_map_index,
                           dag_version_id, working_set)
SELECT pg_temp.bench_uuid(c.ti_start, dr.id || '/' || t.task_id || '/' || c.region_id || '/' || c.region_index),
       t.task_id, dr.dag_id, dr.run_id, c.region_index, c.region_id, c.ti_start,
       CASE WHEN ti_state IN ('success', 'failed') THEN c.ti_start + (30 + t.ord * 7) * interval '1 second' END,
       CASE WHEN ti_state IN ('success', 'failed') THEN 30 + t.ord * 7 END,
       ti_state, 1, 0, 'worker-' || (dr.id %% 8) || '.airflow.internal', 'airflow', 'default_pool', 1, 'default', 1,
       t.operator, c.ti_start - interval '10 seconds', c.ti_start - interval '20 seconds', 'CeleryExecutor',
       c.ti_start + interval '2 minutes',
       CASE WHEN t.place IN ('expansion', 'group') THEN 'item ' || c.region_index END, dr.created_dag_version_id, true
"""
    + _COORDINATES.format(shape="bench_ti")
    + """
CROSS JOIN LATERAL (
    SELECT CASE dr.state
               WHEN 'success' THEN 'success'
               WHEN 'failed' THEN CASE WHEN t.task_id = 'load' THEN 'failed'
                                       WHEN t.task_id = 'publish' THEN 'upstream_failed' ELSE 'success' END
               ELSE CASE WHEN t.task_id IN ('extract', 'transform') THEN 'success'
                         WHEN t.place = 'top' THEN NULL ELSE 'running' END
           END AS ti_state
) s
WHERE dr.id BETWEEN %(first)s AND %(last)s
ORDER BY dr.id, c.ti_start, t.ord
"""
)

# The gates' decisions: "another pass" until the last iteration, which stops.
DECISIONS = (
    f"""
INSERT INTO xcom_v2 (id, task_instance_id, key, value, timestamp)
SELECT pg_temp.bench_uuid(c.ti_start, dr.id || '/decision/' || i),
       pg_temp.bench_uuid(c.ti_start, dr.id || '/' || t.task_id || '/' || c.region_id || '/' || c.region_index),
       '_airflow_loop_decision_reason',
       to_jsonb(CASE WHEN i = {iterations("dr")} - 1 THEN 'every batch done: stop'
                     ELSE 'batch ' || i || ' left ' || (i * 7 %% 11 + 1) || ' rows: another pass' END),
       c.ti_start + interval '1 minute'
"""
    + _COORDINATES.format(shape="bench_ti")
    + """
WHERE dr.id BETWEEN %(first)s AND %(last)s AND t.task_id = 'refine.gate'
ORDER BY dr.id, i
"""
)

# g: a number unique to the key, from which its expiry and size class are drawn (as in the 3.3 deployment).
TASK_KEYS = (
    """
INSERT INTO task_state_store (dag_run_id, task_id, region_id, region_index, key, dag_id, run_id, value, updated_at,
                              expires_at)
SELECT dr.id, t.task_id, c.region_id, c.region_index, t.key, dr.dag_id, dr.run_id,
       CASE WHEN (g * 104729) %% 1000 < 30
            THEN '{"files": "' || repeat(md5(g::text), (30 + (g * 37) %% 280)::int) || '"}'
            ELSE '{"n": ' || (g %% 100000) || ', "note": "' || repeat('x', ((g * 31) %% 173)::int) || '"}'
       END,
       LEAST(%(now)s, c.ti_start + interval '1 minute'),
       CASE WHEN (g * 7919) %% 1000 < 100 THEN %(now)s - (1 + (g * 611953) %% 720) * interval '1 hour'
            WHEN (g * 7919) %% 1000 < 150 THEN NULL
            WHEN (g * 7919) %% 1000 < 200 THEN %(now)s + (1 + (g * 611953) %% 1439) * interval '1 minute'
            ELSE %(now)s + interval '1 day' + ((g * 611953) %% (29 * 1440)) * interval '1 minute'
       END
"""
    + _COORDINATES.format(shape="bench_key")
    + """
CROSS JOIN LATERAL (SELECT dr.id::bigint * 65536 + i * 64 + t.ord AS g) s
WHERE dr.id BETWEEN %(first)s AND %(last)s
ORDER BY dr.id, c.ti_start, t.ord
"""
)

# The task that writes the assets' watermark, ``publish``, is now a task instance with an id and a try: 3.4 records
# both as the writer (its region is left NULL: it runs outside any region).
PUBLISH_ORD = next(n for n, task_id, *_ in shape_rows()[0] if task_id == "publish")
ASSET_WRITERS = f"""
UPDATE asset_state_store AS a
SET last_updated_by_task_instance_id = pg_temp.bench_uuid(
        dr.start_date + {PUBLISH_ORD} * interval '1 minute',
        dr.id || '/publish/' || '{SENTINEL}' || '/-1'),
    last_updated_by_try_number = 1
FROM dag_run AS dr
WHERE a.last_updated_by_kind = 'task' AND dr.dag_id = a.last_updated_by_dag_id AND dr.run_id = a.last_updated_by_run_id
"""
