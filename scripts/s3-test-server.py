"""The S3 server the tests run against: moto's, with every write request handled one at a
time.

moto checks a conditional write's precondition (`If-Match`, `If-None-Match`) and then
writes, without a lock between the two, on a server that runs each request on a thread of
its own. Under load two racing writes can both pass the check and both succeed, which S3
itself never allows: the conformance test `compare_and_swap_race` measured it (two winners
in one round of eight). Holding one lock over each PUT, POST and DELETE makes the check and
the write atomic, as S3's are; reads still run concurrently.

    python s3-test-server.py HOST PORT
"""

import os
import sys
import threading
from typing import Any, Callable, Iterable

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

WRITES = {"PUT", "POST", "DELETE"}


class AtomicWrites:
    """A WSGI application that runs write requests of the one it wraps one at a time."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in WRITES:
            return self.app(environ, start_response)
        with self.lock:
            # The whole response is produced under the lock: moto may write while the
            # body is generated.
            return list(self.app(environ, start_response))


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, AtomicWrites(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
