"""The account commands: break-glass links, API tokens and access scopes (``break_glass``,
``create_api_token``, ``list_api_tokens``, ``revoke_api_token``, ``grant_scope``, ``revoke_scope``), a Django
app of their own beside ``statestore_admin.commands`` (whose ``management/commands/`` holds the state store's:
GC, orphans, statistics, restore, audit pruning). Part of the commands face: it imports the domain, never
another face.
"""
