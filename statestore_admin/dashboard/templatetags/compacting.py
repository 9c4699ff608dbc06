"""``{% compact %}…{% endcompact %}``: the template's own line breaks and indentation inside it become one line
break each, when the template is compiled. A key table repeats its row's markup for every key (50 rows on a run
page, 100 on a task instance's), and the indentation that keeps the template readable was a third of each row's
bytes. Only the template's literal text changes, never what a variable or a tag writes (a key or value keeps its
blanks), and a run of blanks holding a line break stays one: the page renders as before (no ``<pre>`` or
``<textarea>`` belongs inside)."""

import re

from django import template
from django.template.base import TextNode

register = template.Library()

_INDENTED_BREAK = re.compile(r"[ \t\r]*\n\s*")


class CompactNode(template.Node):
    def __init__(self, nodelist):
        self.nodelist = nodelist

    def render(self, context):
        return self.nodelist.render(context)


@register.tag
def compact(parser, token):
    nodelist = parser.parse(("endcompact",))
    parser.delete_first_token()
    for node in nodelist.get_nodes_by_type(TextNode):  # the literal text, in every {% if %}, {% for %}… inside
        node.s = _INDENTED_BREAK.sub("\n", node.s)
    return CompactNode(nodelist)
