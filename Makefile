# Two set-up commands: `make demo` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test bench chaos histories lint fmt typecheck down clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "durable-agents needs Python 3.11+ (set PYTHON=python3.11)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The benchmark's peers (pydantic-ai, the OpenAI Agents SDK, LangGraph) and matplotlib:
# an optional extra, installed only for `make bench`.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(BIN)/agentctl demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/python -m pytest

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench.side_by_side
	$(BIN)/python -m bench.conversation_cost
	$(BIN)/python -m bench.memory_recall
	$(BIN)/python -m bench.whatif_cost

histories: $(STAMP)
	$(BIN)/python -m tests.histories.record

chaos: $(STAMP)
	$(BIN)/python -m bench.chaos --runs 200

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy .

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

down: $(STAMP)
	$(BIN)/agentctl down

clean:
	rm -rf $(VENV) build *.egg-info
