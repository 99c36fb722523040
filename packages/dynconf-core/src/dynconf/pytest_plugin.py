"""pytest fixtures for testing an application's own configuration code.

Loaded through dynconf-core's ``pytest11`` entry point (or ``-p dynconf.pytest_plugin``
where plugin autoloading is off). Nothing is autouse: a test gets a workspace only when it
asks for one. Configuration tests go wrong in two ways that have nothing to do with the
code under test — files written into whatever directory pytest started in, and variables
inherited from the developer's shell — and the two fixtures close exactly those:

* ``dynconf_workspace``: a fresh directory that is also the working directory, with
  ``write(name, text)`` (atomic, so a running watch never sees half a file) and ``env`` /
  ``isolate_env`` for the environment, all undone after the test;
* ``dynconf_env``: the environment half alone, as a factory.

This module imports only pytest and the standard library, so loading it costs a test
session nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["Workspace", "dynconf_env", "dynconf_workspace"]


class Workspace:
    """One test's configuration directory and environment (undone by ``monkeypatch``)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self._monkeypatch = monkeypatch

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    def __fspath__(self) -> str:
        return str(self.root)

    def write(self, name: str, text: str) -> Path:
        """Write ``name`` (parents created) by rename, the way an editor or the agent saves,
        and return its path."""
        target = self.root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{target.name}.pytest-tmp")
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, target)
        return target

    def remove(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)

    def env(self, **variables: str) -> None:
        """Set environment variables for this test."""
        for name, value in variables.items():
            self._monkeypatch.setenv(name, value)

    def isolate_env(self, *prefixes: str) -> None:
        """Unset every variable whose name starts with one of ``prefixes`` for this test."""
        if not prefixes:
            raise ValueError("isolate_env needs at least one prefix, e.g. isolate_env('APP_')")
        for name in list(os.environ):
            if name.startswith(prefixes):
                self._monkeypatch.delenv(name, raising=False)


@pytest.fixture
def dynconf_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A scratch directory that is the working directory for one test."""
    monkeypatch.chdir(tmp_path)
    return Workspace(tmp_path, monkeypatch)


@pytest.fixture
def dynconf_env(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``dynconf_env("APP_", APP_DB__PORT="5432")``: unset every variable under the given
    prefixes, then set the given ones, for this test only."""

    def isolate(*prefixes: str, **variables: str) -> None:
        if not prefixes and not variables:
            raise ValueError("dynconf_env needs a prefix to clear or a variable to set")
        for name in list(os.environ):
            if prefixes and name.startswith(prefixes):
                monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    return isolate
