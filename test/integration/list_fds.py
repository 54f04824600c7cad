#!/usr/bin/python3
"""Prints the descriptors this process has besides 0, 1 and 2: `extra fds: none` or
`extra fds: 9:socket:[123] ...`. Probes with fstat, so listing opens nothing of its own."""
import os


def main():
    extra = []
    for fd in range(3, 65536):
        try:
            os.fstat(fd)
        except OSError:
            continue
        try:
            extra.append("%d:%s" % (fd, os.readlink("/proc/self/fd/%d" % fd)))
        except OSError:
            extra.append(str(fd))
    print("extra fds:", " ".join(extra) if extra else "none", flush=True)


if __name__ == "__main__":
    main()
