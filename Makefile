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
	@# The CNI plugin runs once per pod operation: start it without site (the editable install's import
	@# hook costs ~12 ms a run); it needs only the standard library.
	@printf '#!%s -IS\nimport sys; sys.path.insert(0, "%s")\nfrom services.cni_plugin.main import main; sys.exit(main())\n' \
		"$(CURDIR)/$(VENV)/bin/python" "$(CURDIR)" > $(VENV)/bin/pyngress-cni
	@chmod 0755 $(VENV)/bin/pyngress-cni
	@touch $@

run: setup
	$(VENV)/bin/python examples/run_demo.py

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

bench: setup
	$(VENV)/bin/python bench/run_all.py

clean:
	rm -rf $(VENV) .setup-apt.stamp build *.egg-info
