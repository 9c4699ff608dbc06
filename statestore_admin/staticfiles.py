"""Static files storage: WhiteNoise's hashed, compressed storage, without the 500 of a missing manifest entry.

Django's manifest storage raises ``ValueError`` ("Missing staticfiles manifest entry") for a file that
`collectstatic` has not processed: every page, the login and the 404 page included, then answers 500.
Here such a file gets its plain URL (``/static/css/app.css``), which WhiteNoise serves from the source
folders while the manifest is missing (``WHITENOISE_USE_FINDERS`` in the settings).
"""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class ManifestStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def stored_name(self, name):
        try:
            return super().stored_name(name)
        except ValueError:  # not collected yet: the unhashed name
            return name
