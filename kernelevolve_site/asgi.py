"""ASGI entry point: HTTP (pages, REST API) and websockets (live events) on one server."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelevolve_site.settings.dev")
django_asgi_app = get_asgi_application()

if not os.environ.get("REDIS_URL"):
    # A web server started on its own (the launcher passes REDIS_URL to its children).
    from django.conf import settings

    from kernelevolve_site.embedded_redis import hold_embedded_redis

    hold_embedded_redis(settings.DATA_DIR)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from kernelevolve_site.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
