#!/usr/bin/python3
"""Verifies the DKIM signature of messages with dkimpy.

    verify.py NAME RECORD-FILE MESSAGE-FILE...

NAME is the DNS name the key is published under (SELECTOR._domainkey.DOMAIN)
and RECORD-FILE holds its TXT record ("v=DKIM1; k=rsa; p=..."). The record is
handed to dkimpy through its dnsfunc hook, so no DNS is needed; a query for
any other name finds nothing. For each message it prints one line,
"MESSAGE-FILE pass" or "MESSAGE-FILE fail", and dkimpy's reasons on standard
error. Exit status 0: every message has a signature that verifies; 1: some
do not; 2: usage.
"""
import logging
import sys

import dkim


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    want = sys.argv[1].rstrip(".").lower().encode()
    with open(sys.argv[2], "rb") as f:
        record = f.read().strip()

    def dnsfunc(name, timeout=5):
        if isinstance(name, str):
            name = name.encode()
        if name.rstrip(b".").lower() != want:
            print("query for an unpublished name: %r" % name, file=sys.stderr)
            return None
        return record

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="dkimpy: %(message)s")
    failed = False
    for path in sys.argv[3:]:
        with open(path, "rb") as f:
            msg = f.read()
        d = dkim.DKIM(msg, logger=logging.getLogger("dkimpy"))
        try:
            ok = d.verify(dnsfunc=dnsfunc)
        except dkim.DKIMException as e:
            print("dkimpy: %s: %s" % (path, e), file=sys.stderr)
            ok = False
        print("%s %s" % (path, "pass" if ok else "fail"))
        failed = failed or not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
