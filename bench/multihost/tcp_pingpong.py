#!/usr/bin/env python3
"""What a TCP round trip costs between two namespace hosts without ouro (model_vs_measured.sh).

  tcp_pingpong.py serve ADDR PORT          echo 8-byte messages on one connection, then exit
  tcp_pingpong.py ping ADDR PORT COUNT     COUNT round trips (TCP_NODELAY); prints one line:
                                           "8-byte TCP round trip: min X us, median Y us, mean Z us (COUNT)"
  tcp_pingpong.py exchange-serve ADDR PORT COUNT
  tcp_pingpong.py exchange ADDR PORT COUNT COUNT exchanges: both ends send 8 bytes at once, then
                                           each receives the other's; the client prints
                                           "8-byte TCP exchange: min X us, median Y us, mean Z us (COUNT)"
A collective's step is an exchange, not half a round trip: both ends send at once, and on one
machine each end's CPU then carries its own send and the other's arrival through the kernel's
stack (veth delivers in the sender's context), and each side acknowledges data it cannot answer
in the same segment. Between two namespace hosts at 1 Gbit/s here an exchange took 11-12.5 us
where half a round trip took 6.6-9.9 us.
Both ends wait by polling the socket, as ouro's ranks poll their links: a blocking recv lets an
idle virtual CPU halt, and its wake-up (40-90 us on this VM when nothing else runs) is not what a
rank that spins or yields sees. Bounded: the server serves one connection and stops when it
closes or after 20 s of silence; the client gives up after 20 s per message.
"""
import socket
import statistics
import sys
import time


def recv_exact(conn, n, limit_s=20):
    """n bytes from a non-blocking socket, polled; None if the peer closed or was silent limit_s."""
    data = b""
    deadline = time.monotonic() + limit_s
    while len(data) < n:
        try:
            chunk = conn.recv(n - len(data))
        except BlockingIOError:
            if time.monotonic() > deadline:
                return None
            continue
        if not chunk:
            return None
        data += chunk
    return data


def accept_one(addr, port):
    """The one connection a server serves: accepted within 20 s, non-blocking, TCP_NODELAY."""
    with socket.create_server((addr, port)) as srv:
        srv.settimeout(20)
        conn, _ = srv.accept()
    conn.setblocking(False)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def serve(addr, port):
    with accept_one(addr, port) as conn:
        while True:
            msg = recv_exact(conn, 8)
            if msg is None:
                return
            conn.sendall(msg)


def exchange_serve(addr, port, count):
    with accept_one(addr, port) as conn:
        for _ in range(count):
            conn.sendall(b"87654321")
            if recv_exact(conn, 8) is None:
                return


def connect(addr, port):
    conn = None
    for _ in range(50):  # the server may still be starting: up to 5 s
        try:
            conn = socket.create_connection((addr, port), timeout=20)
            break
        except OSError:
            time.sleep(0.1)
    if conn is None:
        sys.exit(f"tcp_pingpong.py: cannot connect to {addr}:{port} (is the server running in the other host?)")
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    return conn


def client(addr, port, count, what):
    """COUNT rounds of: send 8 bytes, receive 8. Against `serve` a round is a round trip; against
    `exchange-serve` (which sends first each round) both ends send at once: an exchange."""
    conn = connect(addr, port)
    rounds = []
    with conn:
        for _ in range(count):
            t0 = time.perf_counter()
            conn.sendall(b"12345678")
            if recv_exact(conn, 8) is None:
                sys.exit("tcp_pingpong.py: the server closed the connection early")
            rounds.append(time.perf_counter() - t0)
    print(f"8-byte TCP {what}: min {min(rounds) * 1e6:.1f} us, median {statistics.median(rounds) * 1e6:.1f} us, "
          f"mean {statistics.mean(rounds) * 1e6:.1f} us ({count})")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "ping":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "round trip")
    elif len(sys.argv) == 5 and sys.argv[1] == "exchange-serve":
        exchange_serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "exchange":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "exchange")
    else:
        sys.exit(__doc__)
