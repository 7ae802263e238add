# SPDX-License-Identifier: MIT
"""A reply is a valid protobuf message whatever text it carries: a request
naming a module with bytes ff fe and control bytes is answered with the
name escaped, and protobuf's own parser (proto3 string fields must be
UTF-8) takes the reply. Spoken raw over the ipc:// socket (SP over IPC, as
nng frames it), so that no C parser stands between."""
import os
import socket
import struct

import pytest


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + varint(payload)


def reply_classes():
    """Reply and Status of cumod.proto, as protobuf's runtime builds them
    (no protoc needed: the descriptor is written here)."""
    pb = pytest.importorskip("google.protobuf")
    del pb
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf import message_factory
    f = descriptor_pb2.FileDescriptorProto(name="cumod_reply_test.proto",
                                           package="cumodtest",
                                           syntax="proto3")
    st = f.message_type.add(name="Status")
    st.field.add(name="code", number=1, type=5, label=1)
    st.field.add(name="message", number=2, type=9, label=1)
    r = f.message_type.add(name="Reply")
    r.field.add(name="version", number=1, type=13, label=1)
    r.field.add(name="id", number=2, type=4, label=1)
    r.field.add(name="status", number=3, type=11, label=1,
                type_name=".cumodtest.Status")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    d = pool.FindMessageTypeByName("cumodtest.Reply")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(d)
    return message_factory.MessageFactory(pool).GetPrototype(d)


def sp_request(path, body):
    """One request over SP/IPC as an nng req peer; the reply's body."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(path)
        s.sendall(bytes([0, ord("S"), ord("P"), 0, 0x00, 0x30, 0, 0]))
        hs = b""
        while len(hs) < 8:
            hs += s.recv(8 - len(hs))
        msg = struct.pack(">I", 0x80000001) + body
        s.sendall(b"\x01" + struct.pack(">Q", len(msg)) + msg)
        head = b""
        while len(head) < 9:
            head += s.recv(9 - len(head))
        n = struct.unpack(">Q", head[1:])[0]
        data = b""
        while len(data) < n:
            data += s.recv(n - len(data))
        return data[4:]  # the request id nng echoes


def test_a_name_of_bytes_ff_fe_comes_back_escaped_in_a_valid_reply(
        daemon_factory):
    Reply = reply_classes()
    d = daemon_factory(kernels=("vadd",))
    name = b"\xff\xfe\x1b[2J\nforged"
    req = (field(1, 0, 1) + field(2, 0, 7) +
           field(19, 2, field(1, 2, name)))  # load_module { name }
    raw = sp_request(d.url[len("ipc://"):], req)
    r = Reply()
    r.ParseFromString(raw)  # refuses a string that is not UTF-8
    assert r.id == 7
    assert r.status.code != 0
    assert "\\xff\\xfe\\x1b[2J" in r.status.message, r.status.message
    log = d.log_text()
    assert "\\xff\\xfe\\x1b[2J\\nforged" in log, log
    assert not any(line.startswith("forged") for line in log.splitlines())
