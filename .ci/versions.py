"""Prints this interpreter's Python and Django versions; fails unless they are the leg's.

<venv>/bin/python .ci/versions.py 3.13 6.1
"""

import sys

import django

python_series, django_series = sys.argv[1], sys.argv[2]
found_python = "{}.{}".format(*sys.version_info[:2])
found_django = "{}.{}".format(*django.VERSION[:2])
print(f"leg: Python {sys.version.split()[0]}, Django {django.get_version()}")
if (found_python, found_django) != (python_series, django_series):
    sys.exit(
        f"leg: wanted Python {python_series} and Django {django_series}, "
        f"found Python {found_python} and Django {found_django}"
    )
