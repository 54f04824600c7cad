#!/usr/bin/python3
"""Opens junk connections to a local port: `junk_connections.py PORT COUNT MODE`.

MODE flood: COUNT connections one after another, each sending a bad frame (or nothing) and
closing, as fast as the server takes them. MODE idle: COUNT connections held open without a
byte sent; prints "open N" once they are, then waits for stdin to close. Every connect and send
has a timeout, so a frozen server cannot hang the test. Only 127.0.0.1.
"""
import socket
import sys


def main():
    port, count, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    held = []
    opened = 0
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2.0)
        try:
            s.connect(("127.0.0.1", port))
            opened += 1
            if mode == "flood":
                if i % 2 == 0:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n" * 4)
                s.close()
            else:
                held.append(s)
        except OSError:
            s.close()
    print(f"open {opened}", flush=True)
    if mode == "idle":
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
