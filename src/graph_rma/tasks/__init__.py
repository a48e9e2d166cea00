"""Tasks: plain Python functions with typed arguments, one module per task, callable without argparse.

* :mod:`~graph_rma.tasks.node_classification`: the GAT benchmark on Cora/CiteSeer (``run_study``, ``train_run``).
* :mod:`~graph_rma.tasks.graph_to_text`: the GraphWriter trainer shared by AGENDA and WebNLG (DDP, exact resume,
  best checkpoint), decoding and scoring.
* :mod:`~graph_rma.tasks.agenda`, :mod:`~graph_rma.tasks.webnlg`: the two graph-to-text datasets.
* :mod:`~graph_rma.tasks.text_classification`: sentence classification with transformer / self-attentive models.
* :mod:`~graph_rma.tasks.report`: diagnostics of a trained checkpoint, per task.

Modules are imported on use (``from graph_rma.tasks import node_classification``); this package imports none of
them itself.
"""
