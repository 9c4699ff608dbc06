"""OpenAPI extensions for drf-spectacular: our ``Bearer`` token authentication as a security scheme.

Imported by the API's URLconf (``api/urls.py``), which schema generation (``/api/schema/``, ``check --deploy``)
loads before it describes a view; not by ``ApiConfig.ready``, so that other commands start faster.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <token>`` (``manage.py create_api_token`` or the API tokens page)."""

    target_class = "statestore_admin.api.authentication.BearerTokenAuthentication"
    name = "Bearer"  # the scheme SPECTACULAR_SETTINGS["SECURITY"] names

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token: `manage.py create_api_token USERNAME`, or the API tokens page.",
        }
