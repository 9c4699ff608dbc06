"""The pages that read: a module a page or a group of pages. Each parses the request, reads through the
domain (``state.selectors``, ``stats``, ``gc``, ``objects``…) and renders a page, or only its panel for htmx.
What they share is in ``dashboard.http``; the dialogs that change state are in ``dashboard.actions``."""
