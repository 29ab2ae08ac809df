"""The ``harnessrl`` command line: one entry point that loads each service's commands lazily."""
