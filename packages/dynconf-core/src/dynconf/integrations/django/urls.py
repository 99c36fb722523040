"""``path("", include("dynconf.integrations.django.urls"))``: ``healthz``, ``readyz``,
``metrics`` and, with ``DYNCONF['GUARD']``, ``_config/check`` and ``_config/explain/<path>``
(without a guard those two answer 404, like a path that does not exist)."""

from __future__ import annotations

from typing import Any

from dynconf.integrations.django import _urlpatterns

urlpatterns: list[Any] = _urlpatterns()
