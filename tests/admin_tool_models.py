"""Thirty proxy models of Group (no tables), so a test can enable 30 ModelAdmins at once."""

from django.contrib.auth.models import Group

PROXIES = [
    type(
        f"GroupProxy{i:02d}",
        (Group,),
        {
            "__module__": __name__,
            "Meta": type("Meta", (), {"proxy": True, "app_label": "ahentic_tests"}),
        },
    )
    for i in range(30)
]
