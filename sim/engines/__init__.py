"""Engines: each moves bytes and fires timers for a run plan; the catalogue names them and
their capabilities.
"""
