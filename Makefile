# Two set-up commands: `make demo` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The benchmark runs in an environment of its own: the peers' packages never enter ours.
BENCH_VENV ?= .venv-bench
BENCH_BIN := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed

# The suite's part that runs again with each core dependency at its declared lower bound
# (constraints-lowest.txt): the ranges in pyproject.toml are what these two runs prove.
# The peers' plugins (pydantic-ai, the OpenAI Agents SDK) are in [dev], not [test]: the
# tests of ours beside them run with the lock only.
LOWEST_VENV ?= .venv-lowest
LOWEST_BIN := $(LOWEST_VENV)/bin
LOWEST_STAMP := $(LOWEST_VENV)/.installed
# The suite's processes (pytest-xdist, a file to each in turn): its tests mostly wait on
# Temporal, the stores and the processes they start, so three share two cores well.
TEST_WORKERS ?= 3
PARALLEL := -n $(TEST_WORKERS) --dist loadfile
LOWEST_TESTS ?= tests/workflows tests/calling tests/activities tests/conversations \
	tests/delegation tests/worker tests/runtime tests/memory tests/integration

.PHONY: demo test check test-lowest bench chaos histories lint fmt typecheck down clean docs

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "durable-agents needs Python 3.11+ (set PYTHON=python3.11)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The benchmark's peers (pydantic-ai, the OpenAI Agents SDK, Temporal's agent harness,
# LangGraph) and matplotlib: an optional extra, installed only for `make bench`, into its
# own environment.
$(BENCH_STAMP): pyproject.toml constraints.txt
	test -x $(BENCH_BIN)/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

$(LOWEST_STAMP): pyproject.toml constraints-lowest.txt
	test -x $(LOWEST_BIN)/python || $(PYTHON) -m venv $(LOWEST_VENV)
	$(LOWEST_BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints-lowest.txt -e '.[test]'
	touch $(LOWEST_STAMP)

demo: $(STAMP)
	$(BIN)/agentctl demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(PARALLEL)

# The inner loop (about 3 minutes): lint, types, and the tests that need no Temporal server
# and start no process (rules, records, replays of recorded histories; tests/conftest.py
# marks the rest `server`).
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -m "not server" -p no:cacheprovider

test-lowest: $(LOWEST_STAMP)
	$(LOWEST_BIN)/python -m pytest -p no:cacheprovider $(PARALLEL) $(LOWEST_TESTS) \
		--ignore=tests/worker/test_beside_peers.py --ignore=tests/worker/test_plugin_order.py

bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python -m bench.side_by_side
	$(BENCH_BIN)/python -m bench.conversation_cost
	$(BENCH_BIN)/python -m bench.memory_recall
	$(BENCH_BIN)/python -m bench.whatif_cost
	$(BENCH_BIN)/python -m bench.scale

histories: $(STAMP)
	$(BIN)/python -m tests.histories.record

chaos: $(STAMP)
	$(BIN)/python -m bench.chaos --runs 200

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# docs/reference/: the lists the docs link to, printed from the code (starters/reference.py;
# tests/docs/test_reference_is_printed.py fails while they differ).
docs: $(STAMP)
	$(BIN)/python -m durable_agents.starters.reference

down: $(STAMP)
	$(BIN)/agentctl down

clean:
	rm -rf $(VENV) $(LOWEST_VENV) build *.egg-info
