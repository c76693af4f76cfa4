"""JSON text that can sit inside an HTML ``<script>`` element and still parse as JSON.

Inside a script element the HTML parser ends the element at ``</script`` and changes state at
``<!--`` and ``<script`` before JSON ever sees the text, so those must not appear literally; an
ad-hoc backslash (``<\\!--``) is not JSON. Writing ``<``, ``>`` and ``&`` as ``\\u003c``,
``\\u003e``, ``\\u0026`` removes every such sequence while ``JSON.parse`` and ``json.loads`` read
the same value back; U+2028 and U+2029 are escaped too, since older JavaScript treats them as line
ends.
"""

from __future__ import annotations

import json

_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_TABLE = str.maketrans(_SCRIPT_ESCAPES)


def script_json(value: object) -> str:
    """``value`` as JSON text safe to place verbatim inside a ``<script>`` element.

    The characters replaced occur in JSON only inside strings (never in its syntax), so the
    replacement is a valid escape wherever it lands.
    """
    return json.dumps(value, ensure_ascii=False).translate(_SCRIPT_TABLE)
