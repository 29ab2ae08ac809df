"""The runner service: runs one harness on one task in a sandbox with its model calls bound to the gateway.

``rollout.py`` holds the plain functions (what tests call), ``tasks.py`` the thin Celery task, ``harnesses/``
one adapter per agent CLI.
"""
