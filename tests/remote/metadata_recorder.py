"""A plaintext gRPC server that answers every call UNIMPLEMENTED and writes down what each call carried (method
and metadata, one JSON line per call): the eavesdropper of test_client_credentials.py.
Usage: python metadata_recorder.py HOST PORT LOG (prints "ready" once it listens)."""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures

import grpc


class Recorder(grpc.GenericRpcHandler):
    def __init__(self, log: str) -> None:
        self.log = log
        self.lock = threading.Lock()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> None:
        line = json.dumps({"method": handler_call_details.method,
                           "metadata": [list(kv) for kv in handler_call_details.invocation_metadata]})
        with self.lock, open(self.log, "a") as f:
            f.write(line + "\n")
        return None  # UNIMPLEMENTED


def main(host: str, port: str, log: str) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[Recorder(log)])
    server.add_insecure_port(f"{host}:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main(*sys.argv[1:4])
