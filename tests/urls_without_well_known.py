"""A host URLconf that mounts the app but not the root /.well-known/ documents (ahentic.W022)."""

from django.urls import include, path

urlpatterns = [path("ahentic/v1/", include("orchestrator_app.urls"))]
