# bcg: `make setup` installs everything (Debian/Ubuntu, Python 3.11); `make test` runs the test suite; `make lint`
# runs ruff (ruff.toml).
SHELL := /bin/bash
PYTEST_ARGS ?=

.PHONY: setup test lint bench clean

setup:
	bash scripts/setup.sh

test:
	. ./env.sh && python -m pytest -q --timeout=600 $(PYTEST_ARGS) tests

lint:
	. ./env.sh && ruff check .

bench:
	. ./env.sh && python bench/sim_throughput.py && python bench/node_latency.py

clean:
	rm -rf build install .cache
