"""The operator-facing views: /healthz, /readyz, /metrics, /v1/models, the auto
endpoints, explain_route and the smart-route admin page."""
