# Stand-in for the MinIO image where no image registry is reachable (no registry ships a MinIO server): moto's
# S3 server behind the two commands compose/docker-compose.yml uses, `minio server DIR --address :PORT ...` and
# `mc ready local`. Objects live in memory (moto has no disk store), so the `minio` volume stays empty and a
# restart of this service loses them; it is for tests, not for keeping checkpoints.
ARG LOCAL_BASE=harnessrl-local/python:3.11-bookworm
FROM ${LOCAL_BASE}
ARG MOTO_VERSION=5.2.5
RUN pip install -q --no-cache-dir "moto[server]==${MOTO_VERSION}"
COPY minio-standin.py /usr/local/bin/minio
COPY mc-standin.py /usr/local/bin/mc
VOLUME /data
ENTRYPOINT ["minio"]
CMD ["server", "/data"]
