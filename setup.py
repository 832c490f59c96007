"""The C part of samsa (the rest of the build is in pyproject.toml).

protocol/records/_walker.c is the record walker the produce path runs on every
record (see protocol/records/walker.py). It needs a C compiler and Python's
headers (Debian: gcc, python3-dev; scripts/setup.sh installs them). It is
``optional``: where it cannot be built, the install still succeeds and samsa
validates records with walker.py's pure-Python twin (slower; the broker logs it).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("protocol.records._walker", ["protocol/records/_walker.c"],
                             extra_compile_args=["-O2"], optional=True)])
