"""Console scripts of the wheel: `stokerctl` and `stokerd` run the binaries
the wheel carries (stoker/_bin), replacing this Python process."""

import os
import sys

from stoker._daemon import find_binary


def _exec(name):
    path = find_binary(name)
    os.execv(path, [name] + sys.argv[1:])


def stokerctl():
    _exec("stokerctl")


def stokerd():
    _exec("stokerd")
