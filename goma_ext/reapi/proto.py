"""The one place that imports the generated REAPI, ByteStream, longrunning and Bots API stubs."""

from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from buildgrid.common.protos.google.bytestream import bytestream_pb2 as bs_pb2
from buildgrid.common.protos.google.bytestream import bytestream_pb2_grpc as bs_grpc
from buildgrid.common.protos.google.devtools.remoteworkers.v1test2 import (
    bots_pb2,
    bots_pb2_grpc,
    worker_pb2,
)
from buildgrid.common.protos.google.longrunning import operations_pb2, operations_pb2_grpc
from buildgrid.common.protos.google.rpc import code_pb2, status_pb2

__all__ = [
    "bots_pb2", "bots_pb2_grpc", "bs_grpc", "bs_pb2", "code_pb2", "operations_pb2", "operations_pb2_grpc", "re_grpc",
    "re_pb2", "status_pb2", "worker_pb2",
]
