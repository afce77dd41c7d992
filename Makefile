PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test demo lint bench clean

$(STAMP): requirements.txt requirements-dev.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m ruff check skl_ortgrad tests examples bench
	$(PY) -m pytest -q tests

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(PY) -m ruff check skl_ortgrad tests examples bench

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
