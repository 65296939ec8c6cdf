# Issue #15 audit: no part of a provider credential is stored in the clear or shown,
# so the key's last four characters go (the admin shows "set").

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('providers', '0009_providermodel_deployment'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='connection',
            name='api_key_last4',
        ),
    ]
