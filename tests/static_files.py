"""WhiteNoise as the settings configure it, but its table of static files built once per process.

Django's test client builds the middleware chain anew for every client, that is every test, and WhiteNoise,
serving from the finders in tests (nothing is collected), stats every static file of every app each time:
about a twentieth of a pass's CPU (docs/testing.md). The files do not change during a run; the table is kept
per set of the settings it depends on, so a test that overrides them still gets its own.
"""

from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware

# What else decides the table: the finders, where they look, the prefix.
_SETTINGS = ["DEBUG", "STATIC_URL", "STATICFILES_DIRS", "STATICFILES_FINDERS", "INSTALLED_APPS", "FORCE_SCRIPT_NAME"]
_tables: dict[tuple, dict] = {}


class SharedTableWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    def add_files_from_finders(self) -> None:
        names = sorted(name for name in dir(settings) if name.startswith("WHITENOISE_")) + _SETTINGS
        key = tuple((name, repr(getattr(settings, name, None))) for name in names)
        if key not in _tables:  # the finders' files alone, whatever STATIC_ROOT added before them
            own, self.files = self.files, {}
            super().add_files_from_finders()
            _tables[key], self.files = self.files, own
        self.files.update(_tables[key])
