from django.contrib import admin
from django.urls import include, path

from statestore_admin import health, metrics
from statestore_admin.dashboard import errors, languages
from statestore_admin.sso import break_glass, oidc, passwords

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("login/", passwords.LoginView.as_view(), name="login"),
    path("logout/", oidc.OidcLogoutView.as_view(), name="logout"),
    path("oidc/login/", oidc.start, name="oidc_login"),
    path("oidc/callback/", oidc.callback, name="oidc_callback"),
    path("break-glass/", break_glass.view, name="break-glass"),
    path("language/", languages.choose_language, name="choose-language"),
    path("jsi18n/", languages.javascript_catalog, name="javascript-catalog"),
    path("admin/login/", passwords.admin_login),  # before the admin's own: LOCAL_PASSWORDS
    path("admin/", admin.site.urls),
    path("", include("statestore_admin.api.urls")),
    path("", include("statestore_admin.dashboard.urls")),
]

handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.not_found
