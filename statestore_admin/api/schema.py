"""OpenAPI extensions for drf-spectacular: our ``Bearer`` token authentication as a security scheme.

Imported by ``ApiConfig.ready`` so that schema generation (``/api/schema/``, ``check --deploy``) knows it.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <token>`` (``manage.py create_api_token`` or the API tokens page)."""

    target_class = "statestore_admin.tokens.authentication.BearerTokenAuthentication"
    name = "Bearer"  # the scheme SPECTACULAR_SETTINGS["SECURITY"] names

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token: `manage.py create_api_token USERNAME`, or the API tokens page.",
        }
