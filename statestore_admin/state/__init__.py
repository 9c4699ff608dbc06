"""The domain: every rule about the state store. Reads (``selectors``, ``search``, ``stats``,
``insights``), writes (``services``: set, expire, delete, clear, restore, each with an ``Actor`` and its
audit event), GC (``gc``), worker-side objects and orphans (``objects``, ``orphans``), values and expiry
(``values``), access (``permissions``, ``roles``, ``scopes``, ``patterns``), the audit trail (``audit``,
``models``) and downloads (``exports``). It imports ``statestore_admin.airflow`` and never a face; it
raises its own errors (``errors``) and leaves HTTP to the faces."""
