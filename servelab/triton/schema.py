"""Triton's config.pbtxt schema (its model_config.proto): tritonclient's where it is installed,
else the same schema as the lab keeps it, for the passes that have no node and no tritonclient.

Introduced in notebook 6 (the checks of a config.pbtxt you write parse it with this schema).

    config = schema.model_config()    # an empty inference.ModelConfig, to parse text into

model_config.binpb is tritonclient 2.51's model_config_pb2 descriptor, as its wheel carries it
(`python -m servelab.triton.schema` writes it again; tests/test_triton_configs.py keeps it equal
to the installed tritonclient's), so the prepare pass refuses and accepts exactly what the
measure pass does.
"""

from __future__ import annotations

import functools
from pathlib import Path

KEPT = Path(__file__).with_name("model_config.binpb")


def model_config():
    """An empty ModelConfig message of Triton's schema."""
    try:
        from tritonclient.grpc import model_config_pb2
    except ImportError:  # no tritonclient: the prepare and review passes
        return _kept_class()()
    return model_config_pb2.ModelConfig()


@functools.cache
def _kept_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()  # its own: tritonclient's may load beside it
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(KEPT.read_bytes()))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelConfig"))


def installed() -> bytes:
    """The installed tritonclient's schema, as bytes."""
    from tritonclient.grpc import model_config_pb2

    return model_config_pb2.DESCRIPTOR.serialized_pb


if __name__ == "__main__":
    KEPT.write_bytes(installed())
    print(f"wrote {KEPT} ({KEPT.stat().st_size} bytes)")
