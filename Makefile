.PHONY: setup demo test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	rm -rf ./swemill-out
	.venv/bin/swemill build --out ./swemill-out

test: setup
	@bash scripts/test.sh

lint: setup
	.venv/bin/ruff check src tests benchmarks testkit && .venv/bin/mypy src testkit/src && .venv/bin/lint-imports

bench: setup
	.venv/bin/python benchmarks/run_all.py
