# Two commands a new user needs: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CACHE := .cache
VERSITYGW_VERSION := v1.8.0
VERSITYGW := $(CACHE)/bin/versitygw-$(VERSITYGW_VERSION)
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO := $(CACHE)/bin/minio-$(MINIO_VERSION)
GARAGE_VERSION := 2.5.0
GARAGE := $(CACHE)/bin/garage-v$(GARAGE_VERSION)

.PHONY: demo test lint docs unit setup clean

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

# MinIO, for the tests of its deviations from S3 (and for the benchmarks).
$(MINIO):
	mkdir -p $(CACHE)/bin $(CACHE)/gobin
	GOBIN=$(abspath $(CACHE)/gobin) GOFLAGS=-modcacherw go install github.com/minio/minio@$(MINIO_VERSION)
	mv $(CACHE)/gobin/minio $@

# Garage, a third S3-compatible server (signs in its own region; no object tagging).
# Built from crates.io with its sqlite store only, in debug mode without debug info (a fifth
# less CPU than with it, and 97 MB instead of 351 MB).
$(GARAGE):
	mkdir -p $(CACHE)/bin $(CACHE)/cargo
	CARGO_PROFILE_DEV_DEBUG=0 cargo install garage --version $(GARAGE_VERSION) --locked --debug --no-default-features \
		--features bundled-libs,sqlite --root $(abspath $(CACHE)/cargo)
	mv $(CACHE)/cargo/bin/garage $@

# Headless Chromium (Debian's package) renders the HTML report in its tests; needs root (CI is).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get install -y --no-install-recommends chromium || \
		(apt-get update && apt-get install -y --no-install-recommends chromium)

setup: $(BIN)/.installed node_modules/.installed

demo: $(BIN)/.installed
	$(BIN)/ferry demo

lint: $(BIN)/.installed
	$(BIN)/ruff check functions tests bench cdk
	$(BIN)/ruff format --check functions tests bench cdk
	PYTHONPATH=functions $(BIN)/lint-imports --no-cache

# The documentation site (mkdocs.yml, pages in docs/) into site/, in strict mode: a broken link,
# a missing anchor or a page left out of the nav fails the build. Material for MkDocs prints an
# end-of-life notice (May 2027) on every build; NO_MKDOCS_2_WARNING turns it off.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: $(BIN)/.installed node_modules/.installed $(VERSITYGW) $(MINIO) $(GARAGE) $(CHROMIUM) lint docs
	FERRY_VERSITYGW=$(abspath $(VERSITYGW)) FERRY_MINIO=$(abspath $(MINIO)) FERRY_GARAGE=$(abspath $(GARAGE)) \
		$(BIN)/pytest -q --timeout=600 -n auto --dist worksteal

clean:
	rm -rf $(VENV) $(CACHE) site

# `make bench`: Ferry side by side with s5cmd, rclone and the AWS CLI on local MinIO and
# versitygw (bench/README.md). Everything goes into .cache/; options: BENCH_ARGS="--quick".
S5CMD_VERSION := v2.3.0
S5CMD := $(CACHE)/bin/s5cmd-$(S5CMD_VERSION)
AWSCLI_VERSION := 1.46.2
AWSCLI := $(CACHE)/awscli-$(AWSCLI_VERSION)/bin/aws
BENCH_ARGS ?=

# `go install` refuses s5cmd (replace directives); build it from its module instead.
$(S5CMD):
	mkdir -p $(CACHE)/bin $(CACHE)/src
	rm -rf $(CACHE)/src/s5cmd-$(S5CMD_VERSION)
	cp -r "$$(go mod download -json github.com/peak/s5cmd/v2@$(S5CMD_VERSION) | sed -n 's/^.*"Dir": "\(.*\)",$$/\1/p')" $(CACHE)/src/s5cmd-$(S5CMD_VERSION)
	chmod -R u+w $(CACHE)/src/s5cmd-$(S5CMD_VERSION)
	cd $(CACHE)/src/s5cmd-$(S5CMD_VERSION) && GOFLAGS=-modcacherw go build -mod=mod \
		-ldflags "-X github.com/peak/s5cmd/v2/version.Version=$(S5CMD_VERSION) -X github.com/peak/s5cmd/v2/version.GitCommit=module" \
		-o $(abspath $@) .

# The AWS CLI v1 pins its own botocore: it gets a venv of its own, never Ferry's.
$(AWSCLI):
	$(PYTHON) -m venv $(CACHE)/awscli-$(AWSCLI_VERSION)
	$(CACHE)/awscli-$(AWSCLI_VERSION)/bin/pip install --quiet awscli==$(AWSCLI_VERSION)

# rclone and GNU time (which measures each tool's peak memory) come from apt; without root
# the bench still runs and names what is missing.
bench-apt:
	@command -v rclone >/dev/null && test -x /usr/bin/time || \
		apt-get install -y rclone time >/dev/null 2>&1 || \
		(apt-get update >/dev/null 2>&1 && apt-get install -y rclone time >/dev/null 2>&1) || \
		echo "bench: could not install rclone and GNU time with apt-get (needs root): their rows and peak RSS will be missing" >&2

bench: $(BIN)/.installed $(VERSITYGW) $(MINIO) $(S5CMD) $(AWSCLI) bench-apt
	$(BIN)/python -m bench.run --minio $(MINIO) --minio-version $(MINIO_VERSION) \
		--versitygw $(VERSITYGW) --versitygw-version $(VERSITYGW_VERSION) \
		--s5cmd $(S5CMD) --aws $(AWSCLI) --argv "make bench$(if $(BENCH_ARGS), BENCH_ARGS=\"$(BENCH_ARGS)\")" $(BENCH_ARGS)

.PHONY: bench bench-apt profile bench-lean bench-worker-cost bench-startup

# `make bench-lean`: client CPU per 1,000 server-side copies, lean request path vs botocore
# (bench/lean_cpu.py; MinIO and versitygw). Options: LEAN_ARGS="--objects 1000 --repeats 3".
LEAN_ARGS ?=
bench-lean: $(BIN)/.installed $(VERSITYGW) $(MINIO)
	$(BIN)/python -m bench.lean_cpu --minio $(MINIO) --versitygw $(VERSITYGW) $(LEAN_ARGS)

# `make bench-worker-cost`: the CPU one CopyBatch worker spends per small object (the pipeline's
# own code on versitygw and MinIO) and what that costs on Lambda: bench/results/worker_cost.md.
WORKER_COST_ARGS ?=
bench-worker-cost: $(BIN)/.installed $(VERSITYGW) $(MINIO)
	$(BIN)/python -m bench.worker_cost --minio $(MINIO) --versitygw $(VERSITYGW) $(WORKER_COST_ARGS)

# `make bench-startup`: the CPU of `ferry --help`, `ferry copy --help` and, as Lambda runs them
# (the synthesized assets, read-only, in the runtime's Python: python3.13 by default), each Lambda
# handler's import, beside `import botocore.session`'s, in fresh processes:
# bench/results/startup.md (bench/startup.py). Options: STARTUP_ARGS="--rounds 5".
STARTUP_ARGS ?=
bench-startup: $(BIN)/.installed node_modules/.installed
	$(BIN)/python -m bench.startup --argv "make bench-startup$(if $(STARTUP_ARGS), STARTUP_ARGS=\"$(STARTUP_ARGS)\")" $(STARTUP_ARGS)

# `make profile`: where Ferry's CPU goes copying small objects (py-spy, sampled; shares, not timings).
PYSPY_VERSION := 0.4.3
PYSPY := $(CACHE)/py-spy-$(PYSPY_VERSION)/bin/py-spy
$(PYSPY):
	$(PYTHON) -m venv $(CACHE)/py-spy-$(PYSPY_VERSION)
	$(CACHE)/py-spy-$(PYSPY_VERSION)/bin/pip install --quiet py-spy==$(PYSPY_VERSION)

profile: $(BIN)/.installed $(VERSITYGW) $(PYSPY)
	$(BIN)/python -m bench.profile --versitygw $(VERSITYGW) --py-spy $(PYSPY)

# `make load`: 100,000 small objects through `ferry copy` and `ferry run` on local versitygw, and
# a million-key manifest through the pipeline's reader; peak RSS and objects/s per minute go to
# bench/results/load.md (bench/load.py). Options: LOAD_ARGS="--objects 5000 --manifest-keys 10000".
LOAD_ARGS ?=
load: $(BIN)/.installed $(VERSITYGW)
	$(BIN)/python -m bench.load --versitygw $(VERSITYGW) --minio $(MINIO) \
		--argv "make load$(if $(LOAD_ARGS), LOAD_ARGS=\"$(LOAD_ARGS)\")" $(LOAD_ARGS)

.PHONY: load
