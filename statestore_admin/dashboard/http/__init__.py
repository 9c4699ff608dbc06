"""What every view of the pages shares about requests and answers: the permission decorators and the page-or-panel
rendering (``pages``), an action's answers for htmx or without it (``htmx``), the parts htmx fetches that answer a
whole page to a normal request (``fragments``), the query parameters (``params``), file downloads (``downloads``),
and the middlewares that keep htmx panels out of the browser's cache (``caching``) and give a page framed by
Airflow its compact layout (``framed``).

It imports no view: the views (``views``, ``actions``) import from here."""
