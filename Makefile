# bcg: `make setup` installs everything (Debian/Ubuntu, Python 3.11); `make test` runs the test suite.
SHELL := /bin/bash
PYTEST_ARGS ?=

.PHONY: setup test bench clean

setup:
	bash scripts/setup.sh

test:
	. ./env.sh && python -m pytest -q --timeout=600 $(PYTEST_ARGS) tests

bench:
	. ./env.sh && python bench/sim_throughput.py && python bench/node_latency.py

clean:
	rm -rf build install .cache
