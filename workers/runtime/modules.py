"""Served kernels and problems as Python modules: written to a real file (Triton reads a
kernel's source from its file) and imported once per key."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from types import ModuleType


class ModuleCache:
    """Imports ``source`` under ``prefix + key`` in ``folder`` the first time a key is asked
    for, and returns the same module afterwards (safe across threads)."""

    def __init__(self, folder: str, prefix: str) -> None:
        self.folder, self.prefix = folder, prefix
        self._modules: dict[str, ModuleType] = {}
        self._lock = threading.Lock()

    def get(self, key: str, source: str) -> ModuleType:
        module = self._modules.get(key)
        if module is not None:
            return module
        with self._lock:
            if key in self._modules:
                return self._modules[key]
            os.makedirs(self.folder, exist_ok=True)
            name = f"{self.prefix}{key[:24]}"
            path = os.path.join(self.folder, f"{name}.py")
            with open(path, "w") as fh:
                fh.write(source)
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            self._modules[key] = module
            return module
