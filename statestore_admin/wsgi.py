import os

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application
from django.db import connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "statestore_admin.settings")
application = get_wsgi_application()

# `make serve` stops at `migrate`'s system checks; a server started any other way (gunicorn alone, a container's
# command) must not let the demo's accounts sign in either: each worker fails to start with statestore.E050.
# Nor start with a cache that would unpickle a shared store (statestore.E012).
from statestore_admin.dashboard.checks import unsafe_caches  # noqa: E402
from statestore_admin.demo.checks import check_demo_accounts  # noqa: E402  (needs the apps, loaded just above)

refused = check_demo_accounts() + unsafe_caches()
connections.close_all()  # the worker's main thread serves no request: it keeps no connection
if refused:
    raise ImproperlyConfigured(f"{refused[0].msg} {refused[0].hint}")
