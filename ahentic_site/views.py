"""The demo site's own pages (not part of the installable app)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required(login_url="login")
def home(request):
    """The landing page: a little content, a form the agent can read and fill, the sidebar."""
    return render(request, "home.html")
