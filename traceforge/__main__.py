"""``python -m traceforge`` runs the command line."""

from traceforge.cli import run

# Guarded: worker processes started by spawn (Dask's LocalCluster) import this module
# again as ``__mp_main__``, and must not run the command a second time.
if __name__ == "__main__":
    run()
