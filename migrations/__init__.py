"""Alembic migrations of the harnessrl schema (one head)."""
