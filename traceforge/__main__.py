"""``python -m traceforge`` runs the command line."""

from traceforge.cli import main

main()
