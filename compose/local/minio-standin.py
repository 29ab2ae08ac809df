#!/opt/python/bin/python
"""`minio server DIR [--address [HOST]:PORT] [--console-address ...]` served by nanio, an S3 server that keeps
buckets as folders and objects as files under DIR (each written to a temporary file, fsynced, then renamed into
place, so a restart or a crash never leaves half an object).

Only what compose/docker-compose.yml passes is understood; the console address is accepted and ignored (nanio
has no console). Credentials: MINIO_ROOT_USER / MINIO_ROOT_PASSWORD, checked on every request (SigV4).
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser(prog="minio")
parser.add_argument("command", choices=["server"])
parser.add_argument("directory")
parser.add_argument("--address", default=":9000")
parser.add_argument("--console-address", default=":9001")
args = parser.parse_args()
host, _, port = args.address.rpartition(":")
env = dict(os.environ)
env["NANIO_ACCESS_KEY"] = os.environ.get("MINIO_ROOT_USER", "minioadmin")
env["NANIO_SECRET_KEY"] = os.environ.get("MINIO_ROOT_PASSWORD", "minioadmin")
nanio = os.path.join(os.path.dirname(sys.executable), "nanio")
argv = [
    nanio,
    "serve",
    "--host",
    host or "0.0.0.0",
    "--port",
    port,
    "--data-dir",
    args.directory,
    "--no-access-log",
]
print(
    f"minio stand-in: nanio S3 server on {host or '0.0.0.0'}:{port}, objects under {args.directory}",
    flush=True,
)
os.execve(nanio, argv, env)
