"""Websocket URL routes, one consumer per live subject."""

from django.urls import path

from apps.campaigns.consumers import CampaignConsumer

websocket_urlpatterns = [
    path("ws/campaigns/<int:campaign_id>/", CampaignConsumer.as_asgi()),
]
