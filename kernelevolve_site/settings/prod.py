"""A team deployment behind TLS: DATABASE_URL, REDIS_URL and SECRET_KEY come from the
environment, and so do the HTTPS settings below (safe defaults: redirect to HTTPS, HSTS).

https://docs.djangoproject.com/en/5.2/howto/deployment/checklist/
"""

import os

from kernelevolve_site.settings.base import *  # noqa: F403
from kernelevolve_site.settings.base import env_bool

DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# https://docs.djangoproject.com/en/5.2/ref/middleware/#http-strict-transport-security
# An hour by default: raise it (31536000, a year) once the site is known to work over HTTPS only,
# since browsers keep refusing plain HTTP for that long.
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "3600"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

# https://docs.djangoproject.com/en/5.2/ref/settings/#secure-ssl-redirect
# Off only where something in front of the site already redirects HTTP to HTTPS. /healthz stays
# reachable over HTTP for load-balancer probes.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# https://docs.djangoproject.com/en/5.2/ref/settings/#secure-proxy-ssl-header
# Where TLS ends at a proxy, the header the proxy sets to say the client used HTTPS (e.g.
# X-Forwarded-Proto). Set it only if the proxy always sets or strips that header.
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    _header = os.environ["SECURE_PROXY_SSL_HEADER"].strip().upper().replace("-", "_")
    SECURE_PROXY_SSL_HEADER = (f"HTTP_{_header}", "https")
