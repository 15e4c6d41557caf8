"""The gRPC front door's message classes for the Python tests: made from the project's .proto
files (rls/proto) by protoc --python_out at test time and run by python3-protobuf, so no stub
generator is needed.

    rls_pb2, health_pb2 = load_messages(proto_dir, work)
    call = rate_limit_call(channel, rls_pb2)   # call(request, timeout=5) -> RateLimitResponse
"""

import os
import subprocess
import sys


def load_messages(proto_dir, work):
    out = os.path.join(work, "py")
    os.makedirs(out)
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={out}", "rls.proto", "wire.proto",
                    "health.proto"], check=True)
    sys.path.insert(0, out)
    import health_pb2  # noqa: E402
    import rls_pb2  # noqa: E402
    return rls_pb2, health_pb2


RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def rate_limit_call(channel, rls_pb2):
    """ShouldRateLimit on a grpc channel, with the messages load_messages made."""
    return channel.unary_unary(RLS, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                               response_deserializer=rls_pb2.RateLimitResponse.FromString)
