"""The ``AppConfig`` Django picks for ``"dynconf.integrations.django"`` in INSTALLED_APPS."""

from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class DynconfConfig(AppConfig):
    name = "dynconf.integrations.django"
    label = "dynconf"
    verbose_name = "dynconf live configuration"

    def ready(self) -> None:
        from dynconf.integrations.django import configure, start

        configure(dict(getattr(settings, "DYNCONF", {})))
        start()
