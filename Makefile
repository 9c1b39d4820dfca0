# Two commands a new user needs: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CACHE := .cache
VERSITYGW_VERSION := v1.8.0
VERSITYGW := $(CACHE)/bin/versitygw-$(VERSITYGW_VERSION)

.PHONY: demo test lint unit setup clean

$(BIN)/.installed: requirements.txt functions/requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

# The pinned CDK CLI and asl-validator (package.json, package-lock.json), for `npx cdk` and the CDK tests.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# The real S3 server the integration tests talk to, built once into a cache this Makefile owns.
$(VERSITYGW):
	mkdir -p $(CACHE)/bin $(CACHE)/gobin
	GOBIN=$(abspath $(CACHE)/gobin) GOFLAGS=-modcacherw go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	mv $(CACHE)/gobin/versitygw $@

setup: $(BIN)/.installed node_modules/.installed

demo: $(BIN)/.installed
	$(BIN)/ferry demo

lint: $(BIN)/.installed
	$(BIN)/ruff check functions tests bench cdk
	$(BIN)/ruff format --check functions tests bench cdk

test: $(BIN)/.installed node_modules/.installed $(VERSITYGW) lint
	FERRY_VERSITYGW=$(abspath $(VERSITYGW)) $(BIN)/pytest -q --timeout=600

clean:
	rm -rf $(VENV) $(CACHE)
