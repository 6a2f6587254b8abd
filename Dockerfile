# The swemill worker image: the AWS Batch job image, a Ray worker image, a sandbox host.
#
#   docker build -t swemill-worker .
#   docker run --rm swemill-worker swemill doctor
#
# bubblewrap (the default sandbox) needs user namespaces inside the container. For untrusted,
# model-written code run the container under gVisor (runsc): see docs/running-on-aws.md.
FROM python:3.11-slim-bookworm

# bubblewrap: the sandbox; git: sources and snapshots; tini: reaps sandboxed children.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap git tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# uv installs the locked dependency set; the project itself goes in as a wheel.
COPY --from=ghcr.io/astral-sh/uv:0.9 /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PROJECT_ENVIRONMENT=/opt/swemill \
    PATH=/opt/swemill/bin:$PATH

WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
# Dependencies first (a layer that survives code changes), then the package.
RUN uv sync --frozen --no-install-project --no-dev --extra s3 --extra aws --extra openai \
        --extra anthropic --extra ray
COPY src ./src
RUN uv sync --frozen --no-dev --no-editable --extra s3 --extra aws --extra openai \
        --extra anthropic --extra ray \
 && rm -rf /src/src

# An unprivileged user: sandboxes map it to root inside their own user namespace.
RUN useradd --create-home --uid 1000 swemill
USER swemill
WORKDIR /home/swemill
ENV SWEMILL_CACHE=/home/swemill/.cache/swemill

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["swemill", "aws", "batch-child"]
