"""Benchmarks, the demo and the learning recipe: code that drives the services from outside, never part of them.

Each module backs one ``harnessrl bench ...`` command (or ``harnessrl demo``); the services never import this
package. ``recipe.py`` is the learning recipe the demo and ``bench learning`` share.
"""
