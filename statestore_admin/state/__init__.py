"""The two state stores, task and asset: reads (``selectors``: DAGs, runs, task instances, assets, a
key's story, run comparison, the ``/api/v2`` reads), writes (``services``: set, expire, delete, clear,
each with an ``Actor`` and its audit event, the delete order of a row and its worker-side object) and
search across them (``search``). It raises ``core.errors`` and leaves HTTP to the faces."""
