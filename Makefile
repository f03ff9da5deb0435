# Two commands for a fresh machine with Python 3.11+:
#   make lab    -> JupyterLab on notebooks/
#   make test   -> the whole test suite (unit, property, trace loader, dashboards, every notebook,
#                  every lecture in JupyterLab in headless Chromium)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# On Linux also the real Mooncake Store for the store lab (notebooks/lab_mooncake_store.ipynb).
comma  := ,
EXTRAS := $(if $(filter Linux,$(shell uname -s)),test$(comma)store,test)

.PHONY: lab test test-browser setup course reproduce doctor warmup bench nbform clean

# PYTHONWARNINGS: setuptools warns at every editable install that a folder named like the package may
# shadow it; here that folder is the package itself, by design.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	$(BIN)/python -m mooncake_lab warmup   # compile the numba kernels once (~2 min, README), so no lecture waits
	touch $(STAMP)

setup: $(STAMP)

# Jupyter refuses to start as root unless told to (containers, cloud VMs); harmless otherwise.
ROOTFLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# .jupyter/labconfig: the course's JupyterLab defaults (no news or update toasts over the lectures' outputs).
lab: $(STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	    $(BIN)/jupyter lab notebooks/ $(ROOTFLAG) $(LABFLAGS)

test: $(STAMP)
	$(BIN)/python -m pytest

# Only the real-browser test (JupyterLab + headless Chromium; screenshots in build/screenshots/).
test-browser: $(STAMP)
	$(BIN)/python -m pytest -m browser

# Every notebook executed (lectures, then solutions) into browsable HTML: build/course/index.html.
course: $(STAMP)
	$(BIN)/python -m mooncake_lab.course --out build/course

reproduce: $(STAMP)
	$(BIN)/python -m mooncake_lab reproduce

doctor: $(STAMP)
	$(BIN)/python -m mooncake_lab doctor

warmup: $(STAMP)
	$(BIN)/python -m mooncake_lab warmup

# Rewrite every notebook in the form JupyterLab saves it (outputs stripped): after editing notebooks.
nbform: $(STAMP)
	$(BIN)/python -m mooncake_lab.notebook_form

bench: $(STAMP)  ## the speed benchmarks (check_*.py compare two versions: their docstrings)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
