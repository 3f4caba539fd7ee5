"""The demo's routes plus ``bench/bare``: an authenticated DRF view that does nothing, the
baseline bench/poll.py divides by (same server, same authentication)."""

from django.urls import include, path
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView


class BareView(APIView):
    authentication_classes = [SessionAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request):
        return Response({"ok": True})


urlpatterns = [
    path("bench/bare", BareView.as_view()),
    path("", include("ahentic_site.urls")),
]
