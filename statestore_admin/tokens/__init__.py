"""API tokens: the model (only a digest is stored), the ``Bearer`` authentication the API uses, and the
"API tokens" page of one's own tokens. Below the faces that use it (the API, the pages, the admin, the
commands); it imports nothing of theirs and nothing of the domain."""
