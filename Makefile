# RLark: `make run` starts the whole product on the demo fleet; `make test` runs the whole suite.
# DATABASE_URL / REDIS_URL are used when set; otherwise embedded PostgreSQL and Redis are started.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test stop install lint bench messages clean

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	@# uv installs the same pins in a fraction of pip's time (parallel downloads and unpacking;
	@# 28 s against 222 s from a cold cache here); bytecode is compiled at install, as pip does,
	@# because PYTHONDONTWRITEBYTECODE may be set. Without uv (no index for it), pip does it all.
	$(VENV)/bin/python -m pip install --quiet 'uv>=0.9,<1' \
	  && $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(VENV)/bin/python -e '.[dev]' \
	  || $(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/python -m rlark_site.devservices run

test: $(STAMP)
	$(VENV)/bin/python -m rlark_site.devservices test $(PYTEST_ARGS)

stop: $(STAMP)
	$(VENV)/bin/python -m rlark_site.devservices stop

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/lint-imports && $(VENV)/bin/mypy rlark_site clusters jobs rlark_cli

bench: $(STAMP)
	$(VENV)/bin/python -m rlark_site.devservices bench $(BENCH)

messages: $(STAMP)
	$(VENV)/bin/python manage.py makemessages -l zh_Hans --ignore '.venv/*' --ignore '.rlark/*' --ignore 'tests/*' --ignore 'bench/*' --no-obsolete
	$(VENV)/bin/python manage.py compilemessages --ignore '.venv/*' --ignore '.rlark/*'

clean: stop
	rm -rf .rlark
