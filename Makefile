PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test demo lint bench clean docs

$(STAMP): requirements.txt requirements-dev.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# The docs step of `test` is tests/test_docs.py: the `docs` build below (-W, gallery
# executed) on a copy of docs/ and examples/, checked for every public name.
test: $(STAMP)
	$(PY) -m ruff check skl_ortgrad tests examples bench
	$(PY) -m pytest -q tests

demo: $(STAMP)
	$(PY) examples/demo.py

# HTML documentation into docs/_build/html; warnings are errors; runs examples/plot_*.py.
docs: $(STAMP)
	MPLBACKEND=Agg $(PY) -m sphinx -W --keep-going -E -b html docs docs/_build/html

lint: $(STAMP)
	$(PY) -m ruff check skl_ortgrad tests examples bench

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
