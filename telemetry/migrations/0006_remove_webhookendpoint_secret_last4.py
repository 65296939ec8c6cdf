# Issue #15 audit: no part of a webhook signing secret is stored in the clear or
# shown, so its last four characters go (the admin shows "signing secret set").

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('telemetry', '0005_attemptlog_passthrough_dropped'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='webhookendpoint',
            name='secret_last4',
        ),
    ]
