"""Websocket URL routes, one consumer per live subject."""

from django.urls import path

from apps.campaigns.consumers import CampaignConsumer, CampaignListConsumer, NodeConsumer
from apps.registry.consumers import RegistryConsumer

websocket_urlpatterns = [
    path("ws/campaigns/", CampaignListConsumer.as_asgi()),
    path("ws/campaigns/<int:campaign_id>/", CampaignConsumer.as_asgi()),
    path("ws/nodes/<int:node_id>/", NodeConsumer.as_asgi()),
    path("ws/registry/<slug:operator>/", RegistryConsumer.as_asgi()),
]
