"""The demo site's own pages (not part of the installable app)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from orchestrator_app.tools.admin_tools import may_use_admin_tools

# What "Write a page about coffee" and "List the pages" need: the flat pages' admin.
PAGE_PERMISSIONS = ("flatpages.view_flatpage", "flatpages.add_flatpage")


@login_required(login_url="login")
def home(request):
    """The landing page: a little content, a form the agent can read and fill, the sidebar.

    "Things to type" offers the admin prompts only to a user the admin tools serve on flat pages
    (staff with those permissions): the non-staff ``member`` gets the prompts that work for it.
    """
    user = request.user
    page_prompts = may_use_admin_tools(user) and user.has_perms(PAGE_PERMISSIONS)
    return render(request, "home.html", {"page_prompts": page_prompts})


# The demo's icon: browsers ask every site for /favicon.ico, and a 404 in the server log is the
# first thing a newcomer reads as something broken.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="7" fill="#4f46e5"/>'
    '<text x="16" y="23" font-family="sans-serif" font-size="20" font-weight="700" '
    'text-anchor="middle" fill="#fff">a</text></svg>'
)


@require_safe
@cache_control(max_age=86400, public=True)
def favicon(request):
    return HttpResponse(FAVICON, content_type="image/svg+xml")
