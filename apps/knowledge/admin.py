"""Admin registration for knowledge (read-mostly; edits belong in the portal's services)."""

from django.contrib import admin

from apps.knowledge.models import Entry, EntryVersion
from apps.knowledge.selectors.entries import entries_visible


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ("title", "kind", "status", "visibility", "version")
    list_filter = ("kind", "status", "visibility")
    search_fields = ("title", "body")

    def get_queryset(self, request):
        return entries_visible(user=request.user)


@admin.register(EntryVersion)
class EntryVersionAdmin(admin.ModelAdmin):
    list_display = ("entry", "number", "author", "created_at")

    def get_queryset(self, request):
        visible = entries_visible(user=request.user)
        return super().get_queryset(request).filter(entry__in=visible)
