"""The API's JSON renderer."""

import copy

from rest_framework.renderers import JSONRenderer


class JSONRendererEscapingSurrogates(JSONRenderer):
    """DRF's renderer (non-ASCII characters as they are), except for an answer holding a lone surrogate
    (a key or value that Airflow wrote as ``"\\ud800"``, which decodes to half a UTF-16 pair): UTF-8 cannot
    encode it, so that answer spells every non-ASCII character as a ``\\u`` escape instead, which is
    valid JSON and decodes to the same strings."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            escaping = copy.copy(self)
            escaping.ensure_ascii = True
            return JSONRenderer.render(escaping, data, accepted_media_type, renderer_context)
