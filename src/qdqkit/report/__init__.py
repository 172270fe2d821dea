"""The one report layer: how results look to people and to machines.

- ``text``: aligned tables and the number formats (milliseconds, shares, MACs, shortened names).
- ``json_output``: results as strict JSON, with one convention for numbers JSON cannot hold.
- ``html_page``: a self-contained HTML page shell (inline CSS and script, escaping) for drawings
  and reports that open offline.

Nothing here knows about models or engines, so every command renders through the same code.
"""

from __future__ import annotations
