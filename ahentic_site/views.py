"""The demo site's own pages (not part of the installable app)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

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
