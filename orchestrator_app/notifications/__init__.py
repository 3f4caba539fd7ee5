"""Mail notifications: ``services`` (the approval-waiting and scheduled-run mails, the
users' opt-outs, the receivers of the public signals), ``tasks`` (their django-q2 entry
points), ``api`` (the user's opt-outs), ``models``, ``admin``, ``checks``. Nothing is imported
here: the app's models module loads ``models`` early."""
