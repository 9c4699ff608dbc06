"""The dashboard's own tables, in its own database (never Airflow's): GC runs, the audit trail's events and
keys, access scopes, external identities and break-glass links, statistics snapshots and the cache table.
Only models and their migrations live here; the rules that read and write them are in the packages of
their concern (``audit``, ``access``, ``identity``, ``stats``, ``gc``). It imports ``core`` and nothing else
of ours."""
