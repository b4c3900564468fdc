#!/usr/bin/env python3
"""A launcher in ccache's shape: `launch.py COMPILER ARGS…` runs COMPILER ARGS… (and could cache or
distribute it). The shapes workspace's `launcher` toolchain puts it before every compile and link."""

import os
import sys

os.execvp(sys.argv[1], sys.argv[1:])
