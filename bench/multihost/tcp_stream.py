#!/usr/bin/env python3
"""How many bytes a second TCP carries between namespace hosts without ouro, all hosts at once
(model_vs_measured.sh): the model's tcpcpu when the machine's CPUs, not the links, hold it.

  tcp_stream.py sink ADDR PORT                 receive one connection until it closes, then exit
  tcp_stream.py send ADDR PORT START SECONDS   at the wall-clock time START (time.time()), send
                                               1 MiB writes for SECONDS; prints one line:
                                               "sent B bytes in T s"
Every host sends to the next one at once, so every CPU of the machine carries both ends of some
stream; the senders start together at START and the sum of their bytes over SECONDS is the
machine's rate. Bounded: SECONDS is at most 10, the sink stops after 20 s of silence, and a send
that blocks for 20 s ends the run.
"""
import socket
import sys
import time


def sink(addr, port):
    buf = bytearray(1 << 20)
    with socket.create_server((addr, port)) as srv:
        srv.settimeout(20)
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(20)
            while conn.recv_into(buf):
                pass


def send(addr, port, start, seconds):
    seconds = min(seconds, 10.0)
    data = bytes(1 << 20)
    with socket.create_connection((addr, port), timeout=20) as conn:
        delay = start - time.time()
        if delay > 0:
            time.sleep(delay)
        t0 = time.monotonic()
        sent = 0
        while time.monotonic() - t0 < seconds:
            conn.sendall(data)
            sent += len(data)
        elapsed = time.monotonic() - t0
    print(f"sent {sent} bytes in {elapsed:.3f} s")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "sink":
        sink(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
