"""What Django's admin autodiscovery imports: each module registers its models on Django's default site.

The import order is the registration order, which orders the admin's URL patterns (its app-label pattern
reads ``airflow|state|auth|tokens|axes``, as tests/permission_matrix.md lists them): Airflow's state
first, then the dashboard's records and scopes, Django's users and groups (registered again), API tokens.
"""

from statestore_admin.admin_site import state_store  # noqa: F401, I001  (in this order: see above)
from statestore_admin.admin_site import records  # noqa: F401
from statestore_admin.admin_site import accounts  # noqa: F401
from statestore_admin.admin_site import tokens  # noqa: F401
