from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAdminUser
from rest_framework.routers import DefaultRouter

from combos import api

router = DefaultRouter()
# Spec 01 names the resources without a slash (``POST /api/combos``); DRF's
# constructor only takes a bool, so the optional slash is set on the attribute.
router.trailing_slash = "/?"
router.register("combos", api.ComboViewSet, basename="combo")
router.register("model-combo-mappings", api.MappingViewSet, basename="mapping")
router.register("providers", api.ProviderViewSet, basename="provider")
router.register("connections", api.ConnectionViewSet, basename="connection")
router.register("api-keys", api.ApiKeyViewSet, basename="apikey")
router.register("candidate-overrides", api.OverrideViewSet, basename="override")
router.register("smart-routes", api.SmartRouteViewSet, basename="smartroute")

urlpatterns = [
    # drf-spectacular serves the schema to anyone by default; /api/ is staff only.
    path(
        "schema/",
        SpectacularAPIView.as_view(permission_classes=[IsAdminUser]),
        name="api-schema",
    ),
    # the same schema as a browsable page (Swagger UI, bundled by the sidecar)
    path(
        "docs/",
        SpectacularSwaggerView.as_view(
            url_name="api-schema", permission_classes=[IsAdminUser]
        ),
        name="api-docs",
    ),
    path("", include(router.urls)),
]
