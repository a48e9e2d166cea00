"""Former home of ``node_classification_report``, now :func:`graph_rma.tasks.report.node_classification_report`:
the report (``graph-rma report``) lives in one place. The old name works for one release, with a
``DeprecationWarning``; it is looked up on first use (the diagnostics import nothing from the tasks).
"""

from .._deprecation import renamed

__getattr__ = renamed(__name__, {"node_classification_report": "graph_rma.tasks.report:node_classification_report"})
