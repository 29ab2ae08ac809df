# Stand-in for python:3.11-slim-bookworm where no image registry is reachable: Debian's Python 3.11 in a venv at
# /opt/python, first on PATH, so `python` and `pip` mean what they mean in the official image.
ARG LOCAL_BASE=harnessrl-local/debian:bookworm
FROM ${LOCAL_BASE}
ENV LANG=C.UTF-8 \
    PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/python
CMD ["python3"]
