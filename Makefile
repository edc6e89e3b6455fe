# Two entry points do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch; an unpinned torch would pull gigabytes of CUDA wheels.
TORCH_SPEC ?= torch==2.13.0

.PHONY: demo test lint bench clean venv browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python

$(VENV)/.installed-demo: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q ".[torch,data]"
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[test,torch,data]"
	touch $@

demo: $(VENV)/.installed-demo
	cd examples && ../$(BIN)/python demo.py

# Debian's headless Chromium and its driver, for the viewer's browser tests (tests/viewer/test_browser.py);
# installed only when missing, and never downloaded by a tool at run time.
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; fi

test: $(VENV)/.installed-test browser
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

bench: $(VENV)/.installed-test
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/bench_arrow_vs_hf.py

clean:
	rm -rf $(VENV) build *.egg-info
