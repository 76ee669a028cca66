# pyngress container image: nginx and its Lua modules from Debian, pyngress in a venv, supervisord as PID 1.
#
#   make image                      # builds it with podman (makes the base image first when missing)
#   docker build -t pyngress .      # standard syntax (no daemon here to try it): after `make image-wheels`
#
# Python packages come from a wheelhouse built on the host (`make image` writes build/image/wheelhouse and
# build/image/pyngress-wheel): the build itself never talks to a package index.
#
# The entrypoint runs `pyngress up [ARGS]` (supervisord in the foreground, the whole tree under it) when the
# arguments are flags or empty; any other first argument is run instead, so that an ingress-nginx Deployment
# whose args start with /nginx-ingress-controller, or `podman run IMAGE pyngress render ...`, work unchanged.
#
# PID 1 is supervisord (the entrypoint script and `pyngress up` exec into it), with no tini or dumb-init in
# front: tested in tests/e2e/container/, it reaps every orphan (a killed nginx master's workers end up as
# its children and no zombie stays) and turns SIGTERM into an orderly stop of the tree (nginx last, with
# QUIT: in-flight requests finish), then exits 0. An init would only add a process.
#
# Who runs as root by default, and why:
# - supervisord: it starts nginx, which must start as root (below).
# - the nginx master: it binds the HTTP and HTTPS ports and reads the certificate keys, which are root-only.
#   Its workers, which handle every request, run as `nobody` (no `user` directive, started as root).
# - watcher, syncer, proxy, crashmon: root too. They share the root-only run directory (0700; every process
#   refuses a run dir it does not own, and their IPC sockets live there), the syncer runs `nginx -t` on a
#   configuration holding root-only keys, writes nginx.conf into the root-owned prefix and sends HUP to
#   the root nginx master, and the proxy binds the HTTPS port and connects to nginx's socket in the
#   root-only <run-dir>/nginx/. Dropping them alone to another user needs a run directory split by owner.
# - cniserver and cniworkers (only with --enable-cni): root, as netlink, network namespaces and nftables need
#   CAP_NET_ADMIN and CAP_SYS_ADMIN, and the CNI socket must be root-only.
# The ingress tree also runs whole as one non-root user (`--user`, every capability dropped, read-only root
# filesystem, writable run and state directories): then nothing runs as root, and ports below 1024 need
# the net.ipv4.ip_unprivileged_port_start sysctl. Without CAP_SYS_PTRACE root may not read /proc/<pid>/exe of
# nginx's workers (nobody): a SIGKILLed master's workers are found by the process group its pid file names.

# The base image: upstream's by default; `make image` passes a local one made with mmdebstrap, since no
# registry is reachable on the project's machines.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS runtime
# The Makefile's APT_PACKAGES less what only the tests use (curl, ping, procps, iproute2, Go CNI plugins),
# plus openssl (the fallback certificate is made with it) and Debian's Python 3.11, which pyngress requires.
# Debian's site configuration goes: pyngress runs nginx with its own prefix and nginx.conf.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        nginx libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core lua-resty-lrucache \
        libnginx-mod-stream libnginx-mod-stream-js lua-cjson libnginx-mod-http-brotli-filter \
        libnginx-mod-http-headers-more-filter libnginx-mod-http-geoip2 libnginx-mod-http-modsecurity modsecurity-crs nftables openssl python3 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && rm -f /etc/nginx/sites-enabled/default

# The venv is built in a stage of its own, so that neither the wheelhouse nor pip end up in the image.
FROM runtime AS venv
# No python3-venv (Debian's ensurepip): pip runs straight from its wheel, which the wheelhouse carries.
RUN python3 -m venv --without-pip /opt/pyngress
# Dependencies first, a layer that stays cached until pyproject.toml or the pinned versions change.
COPY build/image/wheelhouse/ /tmp/wheelhouse/
RUN pip=$(ls /tmp/wheelhouse/pip-*.whl) \
    && /opt/pyngress/bin/python "$pip/pip" install --no-index --find-links /tmp/wheelhouse --no-cache-dir \
        --disable-pip-version-check --no-warn-script-location \
        $(ls /tmp/wheelhouse/*.whl | grep -v '/pip-')
COPY build/image/pyngress-wheel/ /tmp/pyngress-wheel/
RUN pip=$(ls /tmp/wheelhouse/pip-*.whl) \
    && /opt/pyngress/bin/python "$pip/pip" install --no-index --no-deps --no-cache-dir \
        --disable-pip-version-check /tmp/pyngress-wheel/pyngress-*.whl
# pyngress finds templates/ and supervisord.conf beside its packages (render.py, up.py): in site-packages.
COPY templates/ /opt/pyngress/lib/python3.11/site-packages/templates/
COPY supervisord.conf /opt/pyngress/lib/python3.11/site-packages/supervisord.conf

FROM runtime
COPY --from=venv /opt/pyngress /opt/pyngress
# The CNI plugin as a static binary (cni-plugin/), for nodes without Python: the CNI DaemonSet's init
# container copies it from here into the node's /opt/cni/bin.
COPY build/pyngress-cni-static /usr/lib/pyngress/cni/pyngress-cni
# The passthrough proxy's relay (relay/), a CPython extension on the stable ABI, built on the host by `make image`.
COPY build/pyngress-relay.so /usr/lib/pyngress/pyngress-relay.so
ENV PYNGRESS_RELAY_LIBRARY=/usr/lib/pyngress/pyngress-relay.so
# pyngress's nginx module (nginx-module/), built on the host by `make image` against the same Debian nginx.
COPY build/ngx_http_pyngress_module.so /usr/lib/pyngress/ngx_http_pyngress_module.so
ENV PYNGRESS_NGINX_MODULE=/usr/lib/pyngress/ngx_http_pyngress_module.so
# ingress-nginx's entrypoint and preStop hook, at the paths its deploy.yaml and Helm chart name, so that
# swapping the image of an ingress-nginx Deployment is enough (docs/migrating.md).
COPY deploy/nginx-ingress-controller /nginx-ingress-controller
COPY deploy/wait-shutdown /wait-shutdown
ENV PATH=/opt/pyngress/bin:$PATH
RUN printf '%s\n' '#!/bin/sh' \
        '# Flags (or nothing): the whole tree. Anything else (a command, /nginx-ingress-controller ...): run it.' \
        'case "${1:-}" in ""|-*) exec pyngress up "$@" ;; esac' \
        'exec "$@"' > /usr/local/bin/pyngress-entrypoint \
    && chmod 0755 /usr/local/bin/pyngress-entrypoint \
    && pyngress --help > /dev/null
# SIGTERM (the default) stops the tree gracefully: supervisord stops nginx last with QUIT; nginx's workers
# finish in-flight requests (worker_shutdown_timeout, 240 s at most; supervisord's stopwaitsecs for nginx
# is 30 s) and the container exits 0. Give `podman stop -t` / terminationGracePeriodSeconds more than that.
STOPSIGNAL SIGTERM
EXPOSE 80 443 10254
ENTRYPOINT ["/usr/local/bin/pyngress-entrypoint"]
CMD []
