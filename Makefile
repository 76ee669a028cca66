# `make run` and `make test` set up whatever is missing first; `make setup` alone is idempotent.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
APT_PACKAGES := nginx libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core lua-resty-lrucache \
	libnginx-mod-stream lua-cjson nftables iproute2 iputils-ping curl openssl util-linux procps \
	containernetworking-plugins
PYTEST_ARGS ?=

.PHONY: setup run test bench clean

setup: .setup-apt.stamp $(VENV)/.installed

# Installs only the packages that are missing, so a machine that has them all never calls apt.
.setup-apt.stamp:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

$(VENV)/.installed: pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

run: setup
	$(VENV)/bin/python examples/run_demo.py

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

bench: setup
	$(VENV)/bin/python bench/run_all.py

clean:
	rm -rf $(VENV) .setup-apt.stamp build *.egg-info
