# samsa in a container: one broker, configured with KAFKA_* environment
# variables as Kafka's own images are (KAFKA_LOG_DIRS -> log.dirs,
# KAFKA_ZOOKEEPER_CONNECT -> zookeeper.connect; without it the broker keeps its
# metadata itself). Data lives in the /var/lib/samsa volume.
#
#   docker build -t samsa .
#   docker run -p 9092:9092 samsa
#
# Offline builds: pip in the build stage normally downloads samsa's
# dependencies. Where a build cannot reach the package index, put wheels in
# ./wheelhouse first (on a host with the image's Python, 3.11 on Linux x86_64):
#
#   pip wheel --wheel-dir wheelhouse . "setuptools>=77" wheel
#
# and the build then installs from there only (--no-index). samsa itself is
# always built from the source in this directory, never taken from the
# wheelhouse, so a stale wheel there cannot end up in the image.
#
# BASE_IMAGE: any image with python3 (>= 3.11) and its venv module, e.g. a
# Debian bookworm with python3-venv; both stages use it, so the venv built in
# the first runs unchanged in the second.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
# A venv rather than the system site-packages: Debian's python3 refuses pip
# installs outside one (PEP 668), and the venv is one directory to copy.
RUN python3 -m venv /opt/samsa
# A C compiler and Python's headers for the record walker (setup.py builds
# protocol/records/_walker.c): the slim image has the headers, Debian's python3
# needs python3-dev. Only this stage has them. Where apt cannot reach a
# mirror the build goes on and samsa validates records in Python (slower).
RUN missing=""; command -v gcc >/dev/null || missing="gcc libc6-dev"; \
    python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        || missing="$missing python3-dev"; \
    if [ -n "$missing" ]; then \
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null) \
            || echo "no C compiler: records will be validated in Python"; \
    fi
WORKDIR /src
COPY wheelhouse/ /wheelhouse/
COPY pyproject.toml setup.py README.md LICENSE ./
COPY samsa ./samsa
COPY protocol ./protocol
COPY storage ./storage
COPY config ./config
COPY client ./client
COPY broker ./broker
COPY tools ./tools
COPY pipeline ./pipeline
RUN sh /wheelhouse/pip-install /opt/samsa/bin/pip . \
    && /opt/samsa/bin/samsa --version \
    && (cd / && /opt/samsa/bin/python -c 'import samsa.protocol.records._walker' \
        || echo "the C record walker was not built: records will be validated in Python")

FROM ${BASE_IMAGE}
COPY --from=build /opt/samsa /opt/samsa
COPY server.properties /etc/samsa/server.properties
# A user of its own: the broker needs no privilege (its ports are above 1024).
RUN useradd --system --user-group --home-dir /var/lib/samsa --no-create-home samsa \
    && mkdir -p /var/lib/samsa && chown samsa:samsa /var/lib/samsa
USER samsa
# server.properties holds the single-node defaults; these and any KAFKA_*
# given to `docker run -e` win over it. A wildcard listener so that published
# ports reach it; clients are told localhost:9092 unless
# KAFKA_ADVERTISED_LISTENERS says otherwise.
ENV PATH=/opt/samsa/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    KAFKA_LOG_DIRS=/var/lib/samsa \
    KAFKA_LISTENERS=PLAINTEXT://:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
VOLUME /var/lib/samsa
EXPOSE 9092
# exec form: the broker is PID 1 and gets docker stop's SIGTERM itself, so it
# shuts down cleanly (controlled shutdown in a cluster) before the grace period.
ENTRYPOINT ["samsa", "server", "/etc/samsa/server.properties"]
