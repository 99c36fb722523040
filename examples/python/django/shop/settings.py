"""A minimal Django project with a live configuration."""

from __future__ import annotations

SECRET_KEY = "example-only-not-a-secret"  # noqa: S105
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS = ["dynconf.integrations.django"]  # ready(): init + watch
MIDDLEWARE = ["dynconf.integrations.django.DynconfMiddleware"]  # request.dynconf
DATABASES: dict[str, object] = {}
USE_TZ = True
DYNCONF = {"CONFIGS": ["shop.config:config"]}
