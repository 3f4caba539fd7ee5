"""Scheduled runs: ``services`` (the one writer of ``Schedule`` and ``ScheduleRun``: save,
pause, run now, the tick; public for hosts), ``tasks`` (the tick's django-q2 entry point),
``models``, ``admin``, ``checks``. Nothing is imported here: the app's models module loads
``models`` early."""
