"""The parts of the build pyproject.toml cannot say: the package mapping and the C part.

One import namespace: the source tree keeps the design card's folders at its top
(broker/, protocol/, ...); the wheel installs each under samsa/ (samsa.broker,
samsa.protocol, ...), so nothing generic such as `config` lands in site-packages.
In the source tree, samsa/<folder> is a symbolic link to each folder, so the same
imports work from a checkout.

protocol/records/_walker.c is the record walker the produce path runs on every
record (see protocol/records/walker.py). It needs a C compiler and Python's
headers (Debian: gcc, python3-dev; scripts/setup.sh installs them). It is
``optional``: where it cannot be built, the install still succeeds and samsa
validates records with walker.py's pure-Python twin (slower; the broker logs it).
"""
from setuptools import Extension, find_packages, setup

# The folders that install under samsa/ (tests/, bench/, scripts/ stay out of the wheel)
FOLDERS = ["broker", "client", "config", "pipeline", "protocol", "storage", "testing", "tools"]

packages = ["samsa"] + [f"samsa.{p}" for p in find_packages(include=[f"{f}*" for f in FOLDERS])]

setup(
    packages=packages,
    package_dir={"samsa": "samsa", **{f"samsa.{f}": f for f in FOLDERS}},
    package_data={"samsa.protocol.messages.schemas": ["*.json"],
                  # what a type checker reads: the message classes (stubgen.py), the C walker
                  "samsa.protocol.messages": ["*.pyi"], "samsa.protocol.records": ["*.pyi"],
                  "samsa": ["py.typed"]},  # PEP 561: checkers in users' projects read the types
    ext_modules=[Extension("samsa.protocol.records._walker", ["protocol/records/_walker.c"],
                           depends=["protocol/records/_framing.h"],
                           extra_compile_args=["-O2"], optional=True),
                 # the column decoder a Spark task reads fetched records with (columns.py)
                 Extension("samsa.protocol.records._columns", ["protocol/records/_columns.c"],
                           depends=["protocol/records/_framing.h"],
                           extra_compile_args=["-O2"], optional=True)],
)
