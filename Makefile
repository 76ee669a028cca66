# `make run` and `make test` set up whatever is missing first; `make setup` alone is idempotent.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
APT_PACKAGES := nginx nginx-dev libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core lua-resty-lrucache \
	libnginx-mod-stream libnginx-mod-stream-js lua-cjson lua-busted libnginx-mod-http-brotli-filter libnginx-mod-http-headers-more-filter libnginx-mod-http-geoip2 libnginx-mod-http-modsecurity modsecurity-crs nftables iproute2 iputils-ping curl openssl util-linux procps python3-dev \
	containernetworking-plugins musl-tools prometheus chromium clang libclang-rt-14-dev
# Only the benchmarks need these (the load generator); `make bench` installs them.
BENCH_PACKAGES := wrk
PYTEST_ARGS ?=
# The suite waits (on nginx reloads, process starts, timeouts) far more than it computes: test files run in
# TEST_WORKERS processes (three on two cores: most of a worker's time is spent waiting). --dist loadfile keeps a file's tests in one worker, so that its module fixtures (an
# nginx, a controller) start once; each worker draws its ports from its own range (tests/support/net.py).
# Files are handed out in collection order (not xdist's most-tests-first), which tests/conftest.py makes the
# files that take minutes first and the many short unit files last, so that no long file starts at the end.
TEST_WORKERS ?= 3

.PHONY: setup run test bench clean hooks

setup: .setup-apt.stamp $(VENV)/.installed build/pyngress-cni-static build/pyngress-relay.so build/ngx_http_pyngress_module.so

# The passthrough proxy's relay (relay/): a CPython extension on the stable ABI, built against the venv's headers.
# relay/fuzz_hello.c is the ClientHello parser's libFuzzer harness (tests/unit/proxy/test_hello_fuzz.py), not the module's.
build/pyngress-relay.so: $(filter-out relay/fuzz_hello.c,$(wildcard relay/*.c relay/*.h)) | .setup-apt.stamp $(VENV)/.installed
	@mkdir -p $(@D)
	gcc -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror \
		-I"$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
		-o $@.$$$$.tmp $(filter %.c,$^) && mv -f $@.$$$$.tmp $@

# pyngress's nginx module (nginx-module/): configured with the flags Debian built its nginx with (nginx-dev ships them
# beside nginx's source), so that the packaged nginx loads it.
build/ngx_http_pyngress_module.so: $(wildcard nginx-module/*) | .setup-apt.stamp
	@rm -rf build/nginx-src && mkdir -p build && cp -r /usr/share/nginx/src build/nginx-src
	cd build/nginx-src && . ./conf_flags && ./configure "$${NGX_CONF_FLAGS[@]}" --with-cc-opt="-O2 -fPIC" \
		--add-dynamic-module=$(CURDIR)/nginx-module > configure.log && $(MAKE) -s -f objs/Makefile modules
	cp build/nginx-src/objs/ngx_http_pyngress_module.so $@.$$$$.tmp && mv -f $@.$$$$.tmp $@ && rm -rf build/nginx-src

# The CNI plugin as a static binary, for nodes without Python (cni-plugin/README.md).
build/pyngress-cni-static: $(wildcard cni-plugin/*.c cni-plugin/*.h) cni-plugin/Makefile | .setup-apt.stamp
	@$(MAKE) -s -C cni-plugin OUT=$(CURDIR)/$@

# Installs only the packages that are missing, so a machine that has them all never calls apt.
# Checked again whenever the Makefile changes (a package may have been added to APT_PACKAGES).
install_missing = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

.setup-apt.stamp: Makefile
	@$(call install_missing,$(APT_PACKAGES))
	@touch $@

.setup-bench.stamp: Makefile
	@$(call install_missing,$(BENCH_PACKAGES))
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
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

bench: setup .setup-bench.stamp
	$(VENV)/bin/python bench/run_all.py

clean:
	rm -rf $(VENV) .setup-apt.stamp .setup-bench.stamp build *.egg-info

# The commit-msg hook of CONTRIBUTING.md's rule (subject of at most 72 characters, blank second line).
hooks:
	git config core.hooksPath .githooks

# ---- Container image: `make image` builds the root Dockerfile with podman as $(IMAGE).
# No registry is reachable on the project's machines: the bookworm base is made with mmdebstrap and imported
# once (it stays in podman's storage), and the Python packages come from a wheelhouse built here with the
# venv's pip, pinned to the versions the venv (and so the tests) runs.
IMAGE ?= localhost/pyngress:latest
BASE_IMAGE ?= localhost/debian:bookworm-slim
IMAGE_TOOLS := podman runc mmdebstrap
IMAGE_DIR := build/image
# Debian's podman runs containers here only with runc and without default ulimits.
PODMAN := CONTAINERS_CONF=$(CURDIR)/$(IMAGE_DIR)/containers.conf podman

.PHONY: image image-tools image-base image-wheels

image: image-base image-wheels build/pyngress-cni-static build/pyngress-relay.so build/ngx_http_pyngress_module.so
	$(PODMAN) build --pull=never --network host --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMAGE) .

image-tools:
	@missing=$$(for p in $(IMAGE_TOOLS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(IMAGE_DIR)/containers.conf:
	@mkdir -p $(@D)
	@printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' > $@

# Upstream's bookworm-slim, made here: minbase, merged /usr without the usrmerge package (which pulls in
# perl), and no docs, man pages or locales (dpkg path-excludes, which also hold for the image's apt-get).
MMDEBSTRAP_OPTS := --variant=minbase --format=tar --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
	$(foreach p,man info doc locale groff lintian linda,--dpkgopt='path-exclude=/usr/share/$(p)/*') \
	--dpkgopt='path-include=/usr/share/doc/*/copyright'

image-base: image-tools $(IMAGE_DIR)/containers.conf
	@if ! $(PODMAN) image exists $(BASE_IMAGE); then \
		echo "making $(BASE_IMAGE) with mmdebstrap (log: $(IMAGE_DIR)/mmdebstrap.log)"; \
		rm -f $(IMAGE_DIR)/base.tar; \
		mmdebstrap $(MMDEBSTRAP_OPTS) bookworm $(IMAGE_DIR)/base.tar > $(IMAGE_DIR)/mmdebstrap.log 2>&1 \
			|| { tail -20 $(IMAGE_DIR)/mmdebstrap.log; exit 1; }; \
		$(PODMAN) import --quiet $(IMAGE_DIR)/base.tar $(BASE_IMAGE) > /dev/null || exit 1; \
		rm -f $(IMAGE_DIR)/base.tar; \
	fi

# The dependencies' wheels (and pip's, which the build runs from its wheel): rebuilt when pyproject.toml or
# the venv changes. pyngress's own wheel is rebuilt every time, from a clean copy of the sources (setuptools
# would package stale modules left in a build/lib); SOURCE_DATE_EPOCH makes it byte-identical when nothing
# changed, so that podman's layer cache holds.
$(IMAGE_DIR)/wheelhouse.stamp: pyproject.toml $(VENV)/.installed
	@rm -rf $(IMAGE_DIR)/wheelhouse && mkdir -p $(IMAGE_DIR)
	@$(VENV)/bin/pip freeze --exclude-editable --disable-pip-version-check > $(IMAGE_DIR)/constraints.txt
	@$(VENV)/bin/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")' \
		> $(IMAGE_DIR)/requirements.txt
	$(VENV)/bin/pip wheel -q --disable-pip-version-check -c $(IMAGE_DIR)/constraints.txt -w $(IMAGE_DIR)/wheelhouse \
		-r $(IMAGE_DIR)/requirements.txt pip
	@touch $@

image-wheels: $(IMAGE_DIR)/wheelhouse.stamp
	@rm -rf $(IMAGE_DIR)/src $(IMAGE_DIR)/pyngress-wheel && mkdir -p $(IMAGE_DIR)/src
	@tar -c --exclude=__pycache__ pyproject.toml proto services | tar -x -C $(IMAGE_DIR)/src
	SOURCE_DATE_EPOCH=315532800 $(VENV)/bin/pip wheel -q --disable-pip-version-check --no-deps \
		-w $(IMAGE_DIR)/pyngress-wheel $(IMAGE_DIR)/src
