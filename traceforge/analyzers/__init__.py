"""Analyzers: pure functions from a Trace (or several) to DataFrames.

No I/O, printing or plotting here: renderers format what these compute.
"""
