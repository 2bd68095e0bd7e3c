"""Copy pinned front-end assets into static/vendor/ (served by Django, never from a CDN).

htmx and its websocket extension come from npm (package.json, package-lock.json); Plotly's
bundle comes from the pinned `plotly` Python package, so the chart JSON and the JS agree.
"""

import shutil
import sys
from pathlib import Path

import plotly

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "static" / "vendor"
SOURCES = {
    "htmx.min.js": ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js",
    "htmx-ext-ws.min.js": ROOT / "node_modules" / "htmx-ext-ws" / "dist" / "ws.min.js",
    "plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
}


def main() -> int:
    VENDOR.mkdir(parents=True, exist_ok=True)
    missing = [str(path) for path in SOURCES.values() if not path.exists()]
    if missing:
        print("vendor_assets: missing " + ", ".join(missing) + " (run `npm ci` first)")
        return 1
    for name, source in SOURCES.items():
        shutil.copyfile(source, VENDOR / name)
    print(f"vendor_assets: {len(SOURCES)} files in {VENDOR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
