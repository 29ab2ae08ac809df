# Stand-in for the MinIO image where no image registry is reachable (no registry ships a MinIO server): nanio's
# S3 server (PyPI) behind the two commands compose/docker-compose.yml uses, `minio server DIR --address :PORT ...`
# and `mc ready local`. Objects are files in the `minio` volume at /data, so they survive a restart of this
# service, as MinIO's do.
ARG LOCAL_BASE=harnessrl-local/python:3.11-bookworm
FROM ${LOCAL_BASE}
ARG NANIO_VERSION=0.1.7
RUN pip install -q --no-cache-dir "nanio==${NANIO_VERSION}"
COPY minio-standin.py /usr/local/bin/minio
COPY mc-standin.py /usr/local/bin/mc
VOLUME /data
ENTRYPOINT ["minio"]
CMD ["server", "/data"]
