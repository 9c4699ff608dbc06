"""What every layer above shares, with no rule of the state store in it: the domain's errors (``errors``),
values and expiry (``values``), the one formatting of sizes, counts and times (``formatting``), keyset pages
(``pagination``), glob patterns (``patterns``), the key-status rule (``status``), exact, capped or estimated
counts (``counting``), distinct values by a loose index scan (``index_scan``), one-run-at-a-time locks
(``locks``) and the system checks' error for a whole-number setting (``checks``). It imports
``statestore_admin.airflow`` and nothing else of ours."""
