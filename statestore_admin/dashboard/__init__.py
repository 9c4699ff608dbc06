"""The pages (a face): views that turn a request into arguments, call the domain and render templates
(a page, or its panel for htmx: ``pages``), the actions' confirmations and toasts, forms, filters and
template tags. It imports the domain, ``statestore_admin.tokens`` and ``statestore_admin.web``, never
another face (the API, the admin, the commands)."""
