"""The loader's side of an order hint (README "Order hints"): the
OM_IOC_PREFETCH ioctl on a directory of the mount, in as many calls as the
names take, as a Sampler does. Used by the prefetch and shard tests and by
tools/bench."""

import fcntl
import os

OM_PREFETCH_IOC_SIZE = 16000
# _IOW('o', 0x50, char[16000]) from include/objmount/prefetch.h
OM_IOC_PREFETCH = (1 << 30) | (OM_PREFETCH_IOC_SIZE << 16) | (ord("o") << 8) | 0x50


def hint(dirpath, names, append=False):
    """Hint names (relative to dirpath), in order: "r" replaces the
    directory's hint, "a" appends to it (the calls after the first)."""
    fd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flag = b"a" if append else b"r"
        chunk = b""
        for name in names:
            b = name.encode()
            if len(chunk) + len(b) + 3 > OM_PREFETCH_IOC_SIZE:
                fcntl.ioctl(fd, OM_IOC_PREFETCH,
                            bytearray((flag + chunk).ljust(OM_PREFETCH_IOC_SIZE, b"\0")))
                flag, chunk = b"a", b""
            chunk += (b"\n" if chunk else b"") + b
        fcntl.ioctl(fd, OM_IOC_PREFETCH,
                    bytearray((flag + chunk).ljust(OM_PREFETCH_IOC_SIZE, b"\0")))
    finally:
        os.close(fd)
