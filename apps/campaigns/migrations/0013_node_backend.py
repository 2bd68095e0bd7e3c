"""Each node says which kernel language its source is written in (issue 15: the cute back end
beside Triton); existing rows read it from their source's ``BACKEND`` declaration."""

from django.db import migrations, models


def fill(apps, schema_editor):
    from workers.cute_dsl import declared_backend

    Node = apps.get_model("campaigns", "Node")
    for node in Node.objects.filter(source__contains="BACKEND").only("id", "source").iterator():
        backend = declared_backend(node.source)
        if backend != "triton":
            Node.objects.filter(pk=node.pk).update(backend=backend)


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0012_best_peer_and_incumbent"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="backend",
            field=models.CharField(
                choices=[("triton", "Triton"), ("cute", "CuTe DSL")],
                default="triton",
                max_length=16,
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
