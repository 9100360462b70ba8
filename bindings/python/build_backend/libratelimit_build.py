# SPDX-License-Identifier: MIT
"""The package's own PEP 517 build backend, standard library only.

The package is pure Python, so its wheel is a zip of libratelimit/ and a
.dist-info directory, which this module writes itself: `pip install
./bindings/python` then needs neither setuptools nor wheel nor a network,
in any venv of Python 3.9 or later, with or without build isolation
(pyproject.toml names this backend, with no build requirements).

Run as a script it writes the wheel into a directory, for a machine
without the source tree (the CMake target python_wheel does):

    python3 bindings/python/build_backend/libratelimit_build.py OUTDIR
"""

import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # bindings/python
PACKAGE = "libratelimit"
# A fixed timestamp (the zip format's earliest), so a wheel built twice
# from the same files is the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    """The [project] table's fields this backend writes into METADATA.
    pyproject.toml is read with a few expressions, not a TOML parser:
    tomllib is Python 3.11+, and the file is this project's own."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("\n[project]\n", 1)[1].split("\n[", 1)[0]

    def field(name):
        m = re.search(r'^%s = "([^"]*)"$' % re.escape(name), table, re.M)
        if m is None:
            raise RuntimeError(f"pyproject.toml: [project] has no {name}")
        return m.group(1)

    classifiers = re.search(r"^classifiers = \[(.*?)^\]", table, re.M | re.S)
    lic = re.search(r'^license = \{text = "([^"]*)"\}$', table, re.M)
    return {
        "name": field("name"),
        "version": field("version"),
        "summary": field("description"),
        "requires_python": field("requires-python"),
        "license": lic.group(1) if lic else None,
        "classifiers": re.findall(r'"([^"]*)"', classifiers.group(1)) if classifiers else [],
    }


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['summary']}", f"Requires-Python: {p['requires_python']}"]
    if p["license"]:
        lines.append(f"License: {p['license']}")
    lines += [f"Classifier: {c}" for c in p["classifiers"]]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines) + "\n\n" + readme


def _dist_info(p):
    return f"{p['name']}-{p['version']}.dist-info"


def _wheel_name(p):
    return f"{p['name']}-{p['version']}-py3-none-any.whl"


def _package_files():
    """(path in the wheel, bytes) for every module of the package."""
    out = []
    pkg = os.path.join(ROOT, PACKAGE)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                out.append((f"{PACKAGE}/{name}", f.read()))
    return out


def _dist_info_files(p, tag="py3-none-any"):
    di = _dist_info(p)
    wheel = ("Wheel-Version: 1.0\nGenerator: libratelimit_build\n"
             f"Root-Is-Purelib: true\nTag: {tag}\n")
    # LICENSE is a link to the repository's; reading it follows the link.
    with open(os.path.join(ROOT, "LICENSE"), "rb") as f:
        lic = f.read()
    return [(f"{di}/METADATA", _metadata(p).encode("utf-8")),
            (f"{di}/WHEEL", wheel.encode()),
            (f"{di}/licenses/LICENSE", lic),
            (f"{di}/top_level.txt", f"{PACKAGE}\n".encode())]


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(directory, files, p):
    """A wheel of files (and the RECORD that lists them) in directory."""
    di = _dist_info(p)
    record = [_record_line(path, data) for path, data in files] + [f"{di}/RECORD,,"]
    files = files + [(f"{di}/RECORD", ("\n".join(record) + "\n").encode())]
    name = _wheel_name(p)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, name + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, _EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, os.path.join(directory, name))
    return name


# --------------------------------------------------------------- PEP 517

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    for path, data in _dist_info_files(p):
        full = os.path.join(metadata_directory, *path.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return _dist_info(p)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    return _write_wheel(wheel_directory, _package_files() + _dist_info_files(p), p)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel holding a .pth that puts this directory on sys.path."""
    p = _project()
    pth = [(f"__editable__.{p['name']}.pth", (ROOT + "\n").encode())]
    return _write_wheel(wheel_directory, pth + _dist_info_files(p), p)


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    files = ["pyproject.toml", "README.md", "LICENSE", "build_backend/libratelimit_build.py"]
    files += [path for path, _ in _package_files()]
    pkg_info = _metadata(p).encode("utf-8")
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in files:
            with open(os.path.join(ROOT, rel), "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(f"{base}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o644, 315532800
            t.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mode, info.mtime = len(pkg_info), 0o644, 315532800
        t.addfile(info, io.BytesIO(pkg_info))
    return name


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: libratelimit_build.py OUTDIR")
    print(os.path.join(sys.argv[1], build_wheel(sys.argv[1])))
