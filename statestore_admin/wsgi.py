import os

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application
from django.db import connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "statestore_admin.settings")
application = get_wsgi_application()

# `make serve` stops at `migrate`'s system checks; a server started any other way (gunicorn alone, a container's
# command) must not let the demo's accounts sign in either: each worker fails to start with statestore.E050.
from statestore_admin.demo.checks import check_demo_accounts  # noqa: E402  (needs the apps, loaded just above)

demo_accounts_found = check_demo_accounts()
connections.close_all()  # the worker's main thread serves no request: it keeps no connection
if demo_accounts_found:
    raise ImproperlyConfigured(f"{demo_accounts_found[0].msg} {demo_accounts_found[0].hint}")
