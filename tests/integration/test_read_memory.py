"""Memory that returns (issue 23): once no file is open, a mount holds no
reader and no read buffer.

The soak of issue 23 ended with "open readers 14" and 79 MiB of read
buffers on an idle mount. One cause, pinned here: the kernel sends several
reads of a fresh handle at once (readahead, ASYNC_READ), each installed a
reader of its own, and only the last one installed was ever closed (9
readers and 17.6 MiB held after 150 opens with 8 parallel first reads on
the code before the fix)."""

import os
import threading

from harness import admin
from harness.mount import MiB, payload, wait_for


def test_parallel_first_reads_leave_nothing_open(mount, bucket, s3client):
    data = payload("race", 30 * MiB)
    s3client.put_object(Bucket=bucket, Key="r.bin", Body=data)
    m = mount(bucket)
    path = m.join("r.bin")
    for i in range(120):
        fd = os.open(path, os.O_RDONLY)
        # every read goes to the daemon: the page cache of the file is dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        start = threading.Barrier(8)
        got = {}

        def read(k):
            start.wait()
            got[k] = os.pread(fd, 65536, k * 3 * MiB)

        threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        os.close(fd)
        for k, b in got.items():
            assert b == data[k * 3 * MiB:k * 3 * MiB + 65536], (i, k)

    def idle():
        st = admin.stats_json(m.path)
        return st["reads"]["open_readers"] == 0 and st["memory"]["read_buffer_bytes"] == 0

    assert wait_for(idle, 10), admin.stats_json(m.path)
