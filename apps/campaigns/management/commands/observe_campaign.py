"""Follow a campaign's progress until it finishes: `manage.py observe_campaign ID`."""

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.management.commands.create_campaign import campaign_follow
from apps.campaigns.models import Campaign


class Command(BaseCommand):
    help = "Print a campaign's progress until it finishes."

    def add_arguments(self, parser):
        parser.add_argument("campaign_id", type=int)

    def handle(self, campaign_id, **options):
        if not Campaign.objects.filter(pk=campaign_id).exists():
            raise CommandError(f"no campaign {campaign_id}")
        campaign_follow(self.stdout, campaign_id)
