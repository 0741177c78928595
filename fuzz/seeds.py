#!/usr/bin/python3
"""Writes the seed corpora under fuzz/corpus/<target>/: a few valid messages per parser, in the
layout each fuzz_*.cpp expects (its first byte picks the mode). Run again after a format change."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# Store protocol (comm/setup/store/tcp_store_protocol.hpp).
MAGIC = 0x5352554f
def req(op, key=b'', value=b'', arg=0):
    return struct.pack('<IIIIqq', MAGIC, op, len(key), len(value), arg, 0) + key + value
def resp(status, value=b'', num=0):
    return struct.pack('<IIIIq', MAGIC, status, len(value), 0, num) + value
hello = req(1, value=b'fuzz-token', arg=1)
write('store_protocol', 'hello', b'\0' + hello)
write('store_protocol', 'wrong-token', b'\0' + req(1, value=b'other', arg=1))
write('store_protocol', 'session', b'\0' + hello + req(2, b'k', b'v') + req(3, b'k') + req(4, b'n', arg=5) +
      req(4, b'n', arg=-7) + req(5, b'k', b'vw', arg=1) + req(5, b'new', b'x', arg=-1) + req(6, b'k\nn\nmissing', arg=10))
write('store_protocol', 'add-big', b'\0' + hello + req(4, b'n', arg=2**62) + req(4, b'n', arg=2**62))
write('store_protocol', 'responses', b'\1' + resp(0) + resp(0, b'value', 3) + resp(2, b'a\nb') + resp(3))

# Bootstrap records (comm/setup/bootstrap.cpp PeerInfo::encode) and failure records.
def s(b):
    return struct.pack('<I', len(b)) + b
def peer(rank, host_id, hostname, pid, tcp, cpus=(0b11,)):
    mask = list(cpus) + [0] * (16 - len(cpus))  # 16 words of the affinity mask
    return (struct.pack('<Iq', 0x4f55524f, rank) + s(host_id) + s(hostname) + struct.pack('<q', pid) + s(tcp) +
            struct.pack('<16Q', *mask))
write('bootstrap', 'rank0', b'\0' + peer(0, b'node1/boot/netns:4026531992', b'node1', 1234, b'10.0.0.1:40000'))
write('bootstrap', 'rank3-no-tcp', b'\3' + peer(3, b'h', b'h', 99, b''))
write('bootstrap', 'job-error', b'\1' + b'5:rank 2: ouroCommInitRank: two processes claimed rank 2')

# core/wire.hpp: a program byte count, the program, then the message.
write('wire', 'u32-str-i64', bytes([3, 0, 4, 2]) + struct.pack('<I', 7) + s(b'example') + struct.pack('<q', -1))
write('wire', 'short-str', bytes([2, 3 | (16 << 3), 1]) + s(b'abc') + struct.pack('<Q', 1))

# TCP transport (transport/tcp/tcp_wire.hpp): handshake, and frames cut into recv pieces.
def handshake(comm_key, rank, sock, token):
    return struct.pack('<IIQiiII', 0x4f555248, 1, comm_key, rank, sock, len(token), 0) + token
write('tcp', 'handshake', b'\1' + handshake(0x1234, 1, 0, b'job-token-0123'))
def frame(kind, payload, call=1, aux=0):
    return struct.pack('<IIIIQQ', 0x4f55524d, kind, len(payload), 0, call, aux) + payload
def pieces(stream, size):
    out = b''
    for i in range(0, len(stream), size):
        chunk = stream[i:i + size]
        out += bytes([size - 1]) + chunk
    return out
stream = frame(1, b'x' * 40) + frame(2, b'd' * 16, call=2, aux=7) + frame(1, b'') + frame(3, b'rank 1 failed')
write('tcp', 'frames', b'\0' + bytes([16, 8]) + pieces(stream, 64))
write('tcp', 'frames-small-pieces', b'\0' + bytes([16, 2]) + pieces(stream, 5))

# InfiniBand (transport/ib/ib_protocol.hpp): immediate = kind<<29 | direct<<28 | slot<<20 | seq.
def imm(kind, slot, seq, direct=0):
    return (kind << 29) | (direct << 28) | (slot << 20) | (seq & 0xfffff)
ib_header = struct.pack('<IIIIQQ', 0x4f55524d, 1, 5, 0, 1, 0)
write('ib', 'decoders', b'\0' + bytes([3]) + struct.pack('<I', imm(1, 2, 7)) + struct.pack('<QQQ', 5, 3, 9) +
      struct.pack('<Q', 7) + struct.pack('<H', 64) + bytes([0]) + ib_header)
write('ib', 'endpoint', b'\1' + b'ib1 qpn=17 psn=4660 lid=0 gid=fe800000000000000000000000000001 mtu=3 slots=4 '
      b'payload=65536 slots=7f0000001000:1234 credit=7f0000002000:5678 announce=7f0000003000:9abc')
write('ib', 'receiver', b'\2' + bytes([3]) + struct.pack('<Q', 0) +
      bytes([0]) + struct.pack('<I', imm(1, 0, 0)) + bytes([1]) + ib_header +
      bytes([0]) + struct.pack('<I', imm(2, 1, 1)) + bytes([1]) + struct.pack('<IIIIQQ', 0x4f55524d, 2, 0, 0, 2, 0) +
      bytes([2]) + struct.pack('<Q', 1) + bytes([3]) + struct.pack('<QIH', 0x1000, 7, 64))

# The CUDA proxies' frames (transport/cuda/proxy_wire.hpp): the receiver's FIFO shape (channels,
# slot / 16, LL slot / 16, log2 slots), then a link header whose call and aux carry the frame.
def proxy(kind, call, aux, nbytes):
    return bytes([2, 7, 7, 2]) + struct.pack('<IIIIQQ', 0x4f55524d, kind, nbytes, 0, call, aux)
write('proxy_wire', 'data-simple', proxy(1, 1 | 1 << 8, 5, 100))
write('proxy_wire', 'data-ll', proxy(1, 1 | 1 << 16, 5 | 6 << 32, 40))
write('proxy_wire', 'credit', proxy(1, 2 | 1 << 8 | 1 << 16, 9, 0))
write('proxy_wire', 'abort', proxy(1, 4, 0, 37))

# Saved inputs under fuzz/regressions/<target>/, replayed by every fuzz test before fuzzing: the
# inputs of bugs fixed in the parsers (and of one harness bug), kept so they stay fixed.
def regression(target, name, data):
    d = os.path.join(HERE, 'regressions', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# kAdd whose sum overflows int64 (was signed-overflow UB in the server; now kBadRequest).
regression('store_protocol', 'add-overflow', b'\0' + hello + req(4, b'n', arg=2**62) + req(4, b'n', arg=2**62) +
           req(4, b'm', arg=-2**63) + req(4, b'm', arg=-1))
# kWait "forever" (was an overflow computing the deadline in ns; now saturates).
regression('store_protocol', 'wait-forever', b'\0' + hello + req(6, b'a\nb', arg=2**63 - 1))
# Before the hello, a claim of a large key or value (now refused on the header alone).
regression('store_protocol', 'unauthenticated-large-claim', b'\0' + req(1, value=b'', arg=1)[:12] +
           struct.pack('<I', 1 << 30) + struct.pack('<qq', 1, 0))
# Failure records whose code is out of range or "success" (were taken as a Result as they came).
regression('bootstrap', 'job-error-code-out-of-range', b'\0' + b'99999999999:boom')
regression('bootstrap', 'job-error-success', b'\0' + b'0:not a failure')
# A frame claiming 4 GiB, and a handshake claiming a 2 GiB token.
regression('tcp', 'huge-frame-claim', b'\0' + bytes([16, 8]) + pieces(struct.pack('<IIIIQQ', 0x4f55524d, 1, 0xffffffff, 0, 1, 0), 32))
regression('tcp', 'huge-token-claim', b'\1' + struct.pack('<IIQiiII', 0x4f555248, 1, 1, 1, 0, 0x7fffffff, 0))
