from __future__ import annotations

from django.urls import include, path

from shop import views

urlpatterns = [
    path("", views.index),
    path("", include("dynconf.integrations.django.urls")),  # healthz, readyz, metrics
]
