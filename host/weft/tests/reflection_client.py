"""A gRPC client that knows nothing of Weft but what server reflection
v1alpha tells it (as grpcio-reflection, grpcui and Postman do): it lists
the services, fetches the admin API's descriptors, builds a
CreateExecutionRequest from them and sends a whole Workflow manifest.

    python3 reflection_client.py HOST:PORT MANIFEST.yaml [NAMESPACE]

Without NAMESPACE the request leaves it empty (the manifest's, else default).
"""
import sys

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

SERVICE = "weft.admin.v1.AdminService"


def main(addr, manifest_path, namespace):
    channel = grpc.insecure_channel(addr)
    db = ProtoReflectionDescriptorDatabase(channel)
    print("services:", ",".join(sorted(db.get_services())))
    service = DescriptorPool(db).FindServiceByName(SERVICE)
    method = service.methods_by_name["CreateExecution"]
    request_type = message_factory.GetMessageClass(method.input_type)
    response_type = message_factory.GetMessageClass(method.output_type)
    create = channel.unary_unary(
        f"/{SERVICE}/CreateExecution",
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )
    with open(manifest_path) as f:
        created = create(request_type(spec=f.read(), namespace=namespace), timeout=30)
    print("created:", created.id.namespace, created.id.name)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
