# bcg: `make setup` installs everything (Debian/Ubuntu, Python 3.11); `make test` runs the test suite; `make lint`
# checks lint and format with ruff (ruff.toml); `make format` applies both.
SHELL := /bin/bash
PYTEST_ARGS ?=

.PHONY: setup test lint format bench clean

setup:
	bash scripts/setup.sh

test:
	. ./env.sh && python -m pytest -q --timeout=600 $(PYTEST_ARGS) tests

lint:
	. ./env.sh && ruff check . && ruff format --check .

format:
	. ./env.sh && ruff check --fix . && ruff format .

bench:
	. ./env.sh && python bench/sim_throughput.py && python bench/node_latency.py

clean:
	rm -rf build install .cache
