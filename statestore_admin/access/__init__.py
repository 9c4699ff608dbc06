"""Who may do what, and where: who acts (``actors``: a user through a face, or a command), the Django
permissions of each action (``permissions``), access scopes and their fail-closed rules (``scopes``) and the
querysets a scope reaches (``reach``). Every face asks these modules; none holds an access rule of its own.
It imports ``identity``, ``records`` and ``core``."""
