# GPU Commons server image: `commons up --backend kubernetes` for deploy/kubernetes.
#   docker build -t gpu-commons:0.1.0 .
# The base image is pinned to an exact tag; pin it by digest too in your own registry mirror.

FROM python:3.11.13-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/commons
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/commons/bin/pip install ".[kubernetes]"

FROM python:3.11.13-slim-bookworm
ENV PATH=/opt/commons/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    COMMONS_HOME=/var/lib/commons
RUN groupadd --system --gid 10001 commons \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/commons --no-create-home commons \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/commons /etc/commons
COPY --from=build /opt/commons /opt/commons
COPY examples/commons.yaml /etc/commons/commons.yaml
USER 10001:10001
WORKDIR /var/lib/commons
EXPOSE 8080
ENTRYPOINT ["commons"]
CMD ["up", "--backend", "kubernetes", "--policy", "/etc/commons/commons.yaml", "--host", "0.0.0.0", "--port", "8080"]
