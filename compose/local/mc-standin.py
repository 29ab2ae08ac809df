#!/opt/python/bin/python
"""`mc ready ALIAS`: exit 0 once the S3 server behind ALIAS answers HTTP (the MinIO client's readiness check).

The alias's URL comes from MC_HOST_<ALIAS> (http://user:secret@host:port), as with the real mc; `local` defaults
to http://127.0.0.1:9000.
"""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request

if len(sys.argv) != 3 or sys.argv[1] != "ready":
    sys.exit("mc stand-in: only `mc ready ALIAS` is implemented")
alias = sys.argv[2]
default = "http://127.0.0.1:9000" if alias == "local" else ""
url = urllib.parse.urlsplit(os.environ.get(f"MC_HOST_{alias}", default))
if not url.hostname:
    sys.exit(f"mc stand-in: no MC_HOST_{alias}")
try:
    urllib.request.urlopen(f"{url.scheme}://{url.hostname}:{url.port or 80}/", timeout=2)
except urllib.error.HTTPError:
    pass  # any HTTP answer means the server is up
except OSError as exc:
    sys.exit(f"mc stand-in: {alias} not ready: {exc}")
print(f"{alias} is ready")
