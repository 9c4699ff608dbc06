"""The audit trail: recording a change with who made it (``events``: ``change``, the one event shape
``event_entry``), reading it back for a scope (``trail``) and pruning old events (``retention``)."""
