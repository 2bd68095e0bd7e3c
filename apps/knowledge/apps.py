"""App config for knowledge: it hands campaigns its retriever and takes their ends (findings)."""

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "apps.knowledge"
    label = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.campaigns import hooks
        from apps.knowledge.selectors.retrieval import knowledge_retriever
        from apps.knowledge.services.findings import knowledge_campaign_finished

        hooks.retriever_register(knowledge_retriever)

        def finished(sender, campaign_id: int, **kwargs) -> None:
            knowledge_campaign_finished(campaign_id=campaign_id)

        hooks.campaign_finished.connect(finished, weak=False, dispatch_uid="knowledge-findings")
