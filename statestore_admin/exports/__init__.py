"""Downloads and restore documents: the export formats and their validation (``documents``) and
putting keys back from an export or an audit event (``restore``: preview, then apply, through the state
services)."""
