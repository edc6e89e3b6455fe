# Two entry points do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch for the DataLoader examples. On the public PyPI this wheel is the CUDA build (gigabytes); for the CPU
# build name PyTorch's CPU index: make demo TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
TORCH_INSTALL = $(BIN)/pip install -q $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) "$(TORCH_SPEC)"

.PHONY: demo test lint bench clean venv browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python

# editable, so `make demo` always runs the current source (a later edit needs no reinstall)
$(VENV)/.installed-demo: $(BIN)/python pyproject.toml
	$(TORCH_INSTALL)
	$(BIN)/pip install -q -e ".[torch,data]"
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(TORCH_INSTALL)
	$(BIN)/pip install -q -e ".[test,torch,data]"
	touch $@

demo: $(VENV)/.installed-demo
	cd examples && ../$(BIN)/python demo.py

# Debian's headless Chromium and its driver, for the viewer's browser tests (tests/viewer/test_browser.py);
# installed only when missing, and never downloaded by a tool at run time.
# Without root (a developer's own machine) it says what to install and the browser tests skip.
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
		else echo "note: the viewer's browser tests skip without Debian's chromium and chromium-driver"; fi; fi

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
