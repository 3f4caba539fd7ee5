# Two commands: `make demo` starts the demo site, `make test` runs the tests.
# Both create .venv and install the project with its dev extras from pyproject.toml.
# `make demo DEMO_ADDR=127.0.0.1:8001` serves the demo on another address or port.
# `make test` runs the suite on every core the machine gives this process (pytest-xdist,
# `-n auto`; PYTEST_WORKERS=2 sets the count) with `--dist load`: each worker takes the next tests
# in pytest-django's order, so its transactional tests (which empty the database, the migrations'
# rows with it) run after its other database tests, as in one process (`loadfile`, `loadscope`
# and `worksteal` break that order). `make test PYTEST_WORKERS=0` runs it in one process, as does
# `-n 0` in PYTEST_ARGS (`make test PYTEST_ARGS="-n 0 tests/api"`: the last `-n` wins).
# `make docs` builds the documentation site (docs/, mkdocs.yml) into site/ in strict mode;
# `make docs-serve` serves it on http://127.0.0.1:8002/ (beside the demo) while you edit.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_ADDR ?= 127.0.0.1:8000
PYTEST_WORKERS ?= auto

# The Material theme prints a banner about its successor on every build: nothing to act on here.
export NO_MKDOCS_2_WARNING := 1

.PHONY: demo test lint docs docs-serve clean

$(STAMP): pyproject.toml
	@echo "Creating $(VENV) and installing django-ahentic with its dev extras..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) manage.py ahentic_demo --addrport $(DEMO_ADDR)

test: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist load $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

docs: $(STAMP)
	$(PY) -m pip install --quiet -e ".[docs]"
	$(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	$(PY) -m pip install --quiet -e ".[docs]"
	$(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8002

clean:
	rm -rf $(VENV) var .pytest_cache site
