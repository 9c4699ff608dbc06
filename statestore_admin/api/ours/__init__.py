"""statestore-admin's own API, beyond Airflow's (``/api/statestore/v1``): the overview's figures (``stats``),
search (``search``), the GC dry run (``gc``), the orphans report (``orphans``), the Insights figures
(``insights``) and the audit trail with its restores (``audit``)."""
