"""Looking at runs from outside: the run list, loss and metric plots, the HTML report.

Everything here reads only what a run directory holds (``config.yaml``,
``status.json``, ``metrics.jsonl``, ``checkpoints/``, ``examples/``, ``test/``),
so it works on a finished run, on one another process is still writing, and
on a copy from another machine. Nothing here imports torch; matplotlib is
imported only when a figure is drawn.
"""
