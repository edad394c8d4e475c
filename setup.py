"""Wheel builds copy the site runtime into the package (``ragspine_lite/bundle/site_runtime/``).

``ragspine-lite build-site`` then works from an installed wheel: the web runtime (web/), the
Pyodide core (node_modules/pyodide, pinned), onnxruntime-web's WASM build and micropip
(ragspine_lite.bundle.site_files.stage_runtime). Everything else is in pyproject.toml.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithSiteRuntime(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's files in place
            return
        sys.path.insert(0, str(HERE))
        from ragspine_lite.bundle.site_files import stage_runtime

        dest = Path(self.build_lib) / "ragspine_lite" / "bundle" / "site_runtime"
        copied = stage_runtime(dest)
        print(f"site runtime in the wheel: {', '.join(copied) or 'none (no npm packages)'}")


setup(cmdclass={"build_py": BuildPyWithSiteRuntime})
