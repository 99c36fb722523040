from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from dynconf.integrations import current
from shop.config import config


def index(request: HttpRequest) -> JsonResponse:
    settings = current(config)  # the same object as request.dynconf.one()
    return JsonResponse(
        {"greeting": settings.greeting, "generation": request.dynconf.generation}  # type: ignore[attr-defined]
    )
