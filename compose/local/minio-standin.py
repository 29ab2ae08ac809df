#!/opt/python/bin/python
"""`minio server DIR [--address [HOST]:PORT] [--console-address ...]` served by moto's S3 server.

Only what compose/docker-compose.yml passes is understood; the console address is accepted and ignored (moto
has no console). Credentials (MINIO_ROOT_USER / MINIO_ROOT_PASSWORD) are not checked by moto.
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
moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
print(f"minio stand-in: moto S3 server on {host or '0.0.0.0'}:{port} (objects in memory)", flush=True)
os.execv(moto, [moto, "-H", host or "0.0.0.0", "-p", port])
