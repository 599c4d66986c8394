"""Ember's environment variables: the one table of what they mean and accept.

Every ``EMBER_*`` variable is validated before Ember turns on. A bad value
prints one line naming the variable and what it accepts, and Ember stays off
rather than guessing. ``EMBER_DEV_*`` belongs to the development scripts
(``dev/env``) and is ignored here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


class ConfigError(ValueError):
    """A configuration value Ember cannot accept."""


def _flag(name: str, value: str) -> bool:
    if value in ("0", "1"):
        return value == "1"
    raise ConfigError(f"{name}={value!r} is not accepted: expected 1 (on) or 0 (off)")


def _path(name: str, value: str) -> str:
    """A file to write; "{pid}" in it becomes the process id (one file per
    process when a program starts subprocesses with the same environment)."""
    if not value:
        raise ConfigError(f"{name} is empty: expected the path of a file to write")
    value = value.replace("{pid}", str(os.getpid()))
    parent = os.path.dirname(os.path.abspath(value))
    if not os.path.isdir(parent):
        raise ConfigError(f"{name}={value!r} is not accepted: directory {parent!r} does not exist")
    return value


@dataclass
class Config:
    enabled: bool = False
    stats_path: str | None = None
    # Raw values, for the stats header.
    raw: dict = field(default_factory=dict)


# name -> (parser, Config attribute, one-line description for the docs)
VARIABLES = {
    "EMBER": (_flag, "enabled", "1 turns Ember on at interpreter start-up (via ember.pth), 0 leaves it off"),
    "EMBER_STATS": (_path, "stats_path", "write ember.stats() as JSON to this path at exit; {pid} is replaced by the process id"),
}


def from_environ(environ=None) -> Config:
    """Parse and validate every EMBER_* variable; raise ConfigError on the first bad one."""
    environ = os.environ if environ is None else environ
    cfg = Config()
    for name in sorted(environ):
        if not name.startswith("EMBER") or name.startswith("EMBER_DEV_"):
            continue
        if name not in VARIABLES:
            known = ", ".join(sorted(VARIABLES))
            raise ConfigError(f"{name} is not an Ember variable (known: {known})")
        parse, attr, _ = VARIABLES[name]
        setattr(cfg, attr, parse(name, environ[name]))
        cfg.raw[name] = environ[name]
    return cfg


def report(err: ConfigError) -> None:
    import sys

    print(f"ember: {err}; Ember stays off", file=sys.stderr)
