"""Content-Security-Policy on every response, from the CONTENT_SECURITY_POLICY setting.

Django 5.2 has no CSP of its own (6.0 adds one). The portal's pages load only their own static
files (htmx and Plotly are vendored in static/vendor), so the policy allows scripts and style
sheets from 'self' only: no inline script, no eval, no inline <style>, no on* handlers.
"""

from django.conf import settings
from django.utils.deprecation import MiddlewareMixin


def policy_header(policy: dict[str, list[str]]) -> str:
    """`{"default-src": ["'self'"], ...}` -> `default-src 'self'; ...`"""
    return "; ".join(" ".join([directive, *sources]) for directive, sources in policy.items())


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Sets the header unless a view set its own (MiddlewareMixin: sync and async alike)."""

    def __init__(self, get_response):
        super().__init__(get_response)
        policy = getattr(settings, "CONTENT_SECURITY_POLICY", None)
        self.header = policy_header(policy) if policy else ""

    def process_response(self, request, response):
        if self.header and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.header
        return response
