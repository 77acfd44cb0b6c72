"""One module per CLI verb (memray's layout): each defines ``command``, a click command.

Commands parse options, call the library, render and write; they compute nothing.
Shared options live in :mod:`traceforge.commands.options`.
"""
