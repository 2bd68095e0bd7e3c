"""Trim a standalone search's JSON for the demo: keep every node, edge, gate verdict and
measurement, but cap long evidence strings (IR, PTX, logs) so the file stays small.

    python scripts/trim_search_json.py IN.json OUT.json [--cap 2000]
"""

import argparse
import json

TRUNCATED = "\n… [trimmed for the demo; the full text is in the original search JSON]"


DROPPED = {"cubin_b64"}  # the binary itself; its sha256 stays


def trim(value, cap: int):
    if isinstance(value, str) and len(value) > cap:
        return value[:cap] + TRUNCATED
    if isinstance(value, dict):
        return {k: trim(v, cap) for k, v in value.items() if k not in DROPPED}
    if isinstance(value, list):
        return [trim(v, cap) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--cap", type=int, default=2000)
    args = parser.parse_args()
    with open(args.source) as handle:
        data = json.load(handle)
    for node in data.get("nodes", []):
        if node.get("report"):
            node["report"] = trim(node["report"], args.cap)
    with open(args.target, "w") as handle:
        json.dump(data, handle, separators=(",", ":"))


if __name__ == "__main__":
    main()
