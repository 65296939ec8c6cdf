"""The gateway's own rows: stored Responses (spec 09 §3.4).

A response answered with ``store`` true is kept, scoped to the API key that made it,
until ``expires_at`` (``OMNIROUTE_RESPONSES_TTL_DAYS``; the daily ``prune_logs`` job
deletes expired rows, ``telemetry.prune``).  ``context`` is the conversation before
this response's own input (what a ``previous_response_id`` chain rebuilt), so
continuing from any stored response is one read.
"""

from __future__ import annotations

from django.db import models


class StoredResponse(models.Model):
    #: the ``resp_…`` id the client received
    id = models.CharField(primary_key=True, max_length=128)
    api_key = models.ForeignKey(
        "combos.ApiKey", on_delete=models.CASCADE, db_constraint=False
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    #: the response object as answered (without the ``omniroute`` report)
    response = models.JSONField()
    #: the items before this request's input (oldest first), and its own input
    context = models.JSONField(default=list)
    input_items = models.JSONField(default=list)
    #: the first response of the ``previous_response_id`` chain (its session)
    root_id = models.CharField(max_length=128)

    class Meta:
        indexes = (models.Index(fields=("expires_at",), name="storedresp_expires"),)

    def __str__(self) -> str:
        return self.id
