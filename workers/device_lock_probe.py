"""Whether a confined run was handed the device lock (``workers.device_lock``) and could take
it within ``wait_s``: ``python -m workers.device_lock_probe`` behind the boundary, as the tests
run it."""

from workers import device_lock
from workers.confined import serve_json


def probe(request: dict) -> dict:
    fd = device_lock.inherited()
    with device_lock.held(fd, float(request.get("wait_s", 1.0))) as info:
        return {"fd": fd, **info}


if __name__ == "__main__":
    serve_json(probe)
