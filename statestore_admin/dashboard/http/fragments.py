"""The parts of a page that htmx fetches (a dialog, the overview's largest values) answer a whole page to a
normal request (issue 42): whoever opens such an address (a link copied, a reload, a browser without JavaScript)
gets the base layout, a title and the navigation around the part, never a bare table or form.

One mechanism for every such view: marked ``@fragment(title)``, it returns its part as a ``TemplateResponse``
(``htmx.dialog`` does); to htmx (django-htmx's ``request.htmx``) the part goes out as it is, to a normal request
the decorator renders it inside ``fragment_page.html``, a page of ``base.html`` that includes the part. Any other
answer (a redirect, a 204, a toast's line of text) passes unchanged. ``tests/dashboard/shell/test_fragments.py``
requests every route whose view is so marked, with and without htmx, and checks that every address a template's
``hx-get`` or ``hx-post`` names is one of them.
"""

from functools import wraps

from django.template.response import SimpleTemplateResponse

FRAGMENT = "statestore_fragment"
PAGE = "fragment_page.html"


def fragment(title, *, heading: bool = False, frame: str = "dialog-page"):
    """Mark ``view`` as answering a part of a page to htmx, and a page around that part to anyone else.
    ``title``: the page's title (lazily translated); ``heading``: the title as the page's ``<h1>`` too (a
    dialog names itself in its own heading); ``frame``: the class of the box the part sits in."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            response = view(request, *args, **kwargs)
            if not request.htmx and isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
                response.context_data = {
                    **(response.context_data or {}),
                    "fragment": response.template_name,
                    "fragment_title": title,
                    "fragment_heading": heading,
                    "fragment_frame": frame,
                }
                response.template_name = PAGE
            return response

        setattr(wrapper, FRAGMENT, True)
        return wrapper

    return decorate


def is_fragment(view) -> bool:
    return getattr(view, FRAGMENT, False) is True
