from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AdminSiteConfig(AppConfig):
    """Django admin's pages for the state store, the dashboard's records, access scopes and API tokens. After
    ``django.contrib.admin`` and ``django.contrib.auth`` in INSTALLED_APPS: it registers Django's users and
    groups again, with their access scopes."""

    name = "statestore_admin.admin_site"
    label = "admin_site"
    verbose_name = _("Django admin")
