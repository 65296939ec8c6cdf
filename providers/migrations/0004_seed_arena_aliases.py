"""Seed the Arena aliases of spec 06 §3.3 (effort and suffix variants whose base
model only an alias can name).  Existing rows with these names are left alone."""

from django.db import migrations

SEED = (
    ("gpt-5-high", "gpt-5"),
    ("gemini-2.0-flash-001", "gemini-2.0-flash"),
    ("deepseek-v3.2-thinking", "deepseek-reasoner"),
)


def seed(apps, schema_editor):
    alias = apps.get_model("providers", "ArenaAlias")
    for arena_name, model_id in SEED:
        alias.objects.get_or_create(arena_name=arena_name, defaults={"model_id": model_id})


def unseed(apps, schema_editor):
    alias = apps.get_model("providers", "ArenaAlias")
    for arena_name, model_id in SEED:
        alias.objects.filter(arena_name=arena_name, model_id=model_id).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("providers", "0003_arena_scores_and_aliases"),
    ]

    operations = [
        migrations.RunPython(seed, unseed),
    ]
