"""Benchmark and report scripts of the checkout, run as ``python tools/<name>.py``.

A package so that tests import them as ``tools.<name>`` (pytest puts the checkout's root on
``sys.path``: ``pythonpath`` in pyproject.toml); not part of the installed distribution.
"""
