PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Python 3.13 runs the suite a second time with plain onnxruntime (no onnxruntime-training
# wheels there): the newest pyenv 3.13.x (free-threaded builds skipped), else a python3.13 on
# PATH that actually runs (the pyenv shim refuses unless PYENV_VERSION selects 3.13).
# Override with PYTHON313=/path/to/python3.13.
PYTHON313 ?= $(shell p=$$(ls -d "$$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13 \
	2>/dev/null | grep -v 't/bin/' | sort -V | tail -n 1); \
	if [ -n "$$p" ] && "$$p" -c pass 2>/dev/null; then echo "$$p"; \
	elif python3.13 -c pass 2>/dev/null; then command -v python3.13; fi)
VENV313 := .venv313
PY313 := $(VENV313)/bin/python
STAMP313 := $(VENV313)/.installed

.PHONY: venv venv313 test test311 test311-onnx test311-onnx-estimators test311-onnx-rest \
	test313 demo lint bench clean docs

# $(call make_venv,interpreter,venv folder,stamp): create the venv if needed, install the
# pinned requirements and the package (editable), then the stamp.
define make_venv
	test -x $(2)/bin/python || $(1) -m venv $(2)
	$(2)/bin/python -m pip install --quiet --upgrade pip
	$(2)/bin/python -m pip install --quiet -r requirements-dev.txt
	$(2)/bin/python -m pip install --quiet --no-deps -e .
	touch $(3)
endef

$(STAMP): requirements.txt requirements-dev.txt setup.py
	$(call make_venv,$(PYTHON),$(VENV),$(STAMP))

venv: $(STAMP)

$(STAMP313): requirements.txt requirements-dev.txt setup.py
	@test -n "$(PYTHON313)" || { echo "Python 3.13 not found: install it (pyenv install 3.13)" \
		"or set PYTHON313=/path/to/python3.13" >&2; exit 1; }
	$(call make_venv,$(PYTHON313),$(VENV313),$(STAMP313))

venv313: $(STAMP313)

# `test` = ruff, then three runs of the suite, two at a time, each run's output printed
# whole when it ends (--output-sync): the suite on Python 3.11 (onnxruntime-training-cpu;
# "auto" is the onnxruntime-training backend, the backend tests run both), the suite again
# there with "auto" meaning the standard-ONNX backend, and the suite on Python 3.13 (plain
# onnxruntime, "onnx" backend). The second run goes in two halves (tests/estimators, the
# rest), each after one of the whole runs: on 2 cores (AMD EPYC, December 2026) the three
# runs took 441, 362 and 424 s, and two of them one after the other 786 s; the halves end
# with the whole runs. The docs step is tests/test_docs.py: the `docs` build below (-W,
# gallery executed) on a copy of docs/ and examples/, checked for every public name; it
# runs once per Python. JOBS=1 runs them one after the other.
JOBS ?= 2
test: lint $(STAMP313)
	$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target test311 test313 \
		test311-onnx-estimators test311-onnx-rest

test311: $(STAMP)
	$(PY) -m pytest -q tests

# The standard-ONNX backend's run, in its two halves.
test311-onnx: test311-onnx-estimators test311-onnx-rest

test311-onnx-estimators: $(STAMP)
	SKL_ORTGRAD_BACKEND=onnx $(PY) -m pytest -q tests/estimators

test311-onnx-rest: $(STAMP)
	SKL_ORTGRAD_BACKEND=onnx $(PY) -m pytest -q tests --ignore=tests/estimators \
		--deselect tests/test_docs.py

test313: $(STAMP313)
	$(PY313) -m pytest -q tests

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
	rm -rf $(VENV) $(VENV313) build dist *.egg-info .pytest_cache .ruff_cache
