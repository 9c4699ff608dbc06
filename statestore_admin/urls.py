from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from statestore_admin import health, metrics
from statestore_admin.dashboard import errors
from statestore_admin.sso import oidc

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", oidc.OidcLogoutView.as_view(), name="logout"),
    path("oidc/login/", oidc.start, name="oidc_login"),
    path("oidc/callback/", oidc.callback, name="oidc_callback"),
    path("admin/", admin.site.urls),
    path("", include("statestore_admin.api.urls")),
    path("", include("statestore_admin.dashboard.urls")),
]

handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.not_found
