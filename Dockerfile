# samsa in a container: a single broker on the embedded metadata store.
# Configure with KAFKA_* environment variables (KAFKA_LOG_DIRS -> log.dirs) as
# with Kafka's own images; data lives in the /var/lib/samsa volume.
FROM python:3.11-slim

WORKDIR /opt/samsa
COPY pyproject.toml README.md server.properties ./
COPY protocol ./protocol
COPY storage ./storage
COPY config ./config
COPY broker ./broker
COPY pipeline ./pipeline
RUN pip install --no-cache-dir . && useradd --system --home /var/lib/samsa samsa \
    && mkdir -p /var/lib/samsa && chown samsa /var/lib/samsa

USER samsa
ENV KAFKA_LOG_DIRS=/var/lib/samsa \
    KAFKA_LISTENERS=PLAINTEXT://:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
VOLUME /var/lib/samsa
EXPOSE 9092
ENTRYPOINT ["samsa", "server", "/opt/samsa/server.properties"]
