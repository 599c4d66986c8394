"""Imported by ember.pth at start-up when EMBER is set in the environment."""

from ember import _start_from_environment

_start_from_environment()
