"""The study drivers behind the results pages in docs/: one module per page, run from the repository root.

    python -m studies.cora run [STAGE ...]     # a driver measures (runs under runs/, resumable) ...
    python -m studies.cora report              # ... and writes docs/<page>/results.json and the page's blocks
    python -m studies.render                   # every page's generated blocks from the committed results files
    python -m studies.render --check           # the same, writing nothing: lists each page that differs

Drivers: ``baselines``, ``cora``, ``text``, ``graph_to_text`` (AGENDA and WebNLG), ``diagnostics``, ``metrics``,
``authors_update`` and ``where_it_helps`` (the earlier sweep); :mod:`studies.pages` is what they share to splice
generated blocks into a page, :mod:`studies.render` the one renderer of every page.
"""
