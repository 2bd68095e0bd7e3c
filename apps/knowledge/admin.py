"""Admin registration for knowledge (read-mostly; edits belong in the portal's services)."""

from django.contrib import admin

from apps.knowledge.models import Entry, EntryVersion


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ("title", "kind", "status", "visibility", "version")
    list_filter = ("kind", "status", "visibility")
    search_fields = ("title", "body")


admin.site.register(EntryVersion)
