from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from combos import api

router = DefaultRouter(trailing_slash="/?")
router.register("combos", api.ComboViewSet, basename="combo")
router.register("model-combo-mappings", api.MappingViewSet, basename="mapping")
router.register("providers", api.ProviderViewSet, basename="provider")
router.register("connections", api.ConnectionViewSet, basename="connection")
router.register("api-keys", api.ApiKeyViewSet, basename="apikey")
router.register("candidate-overrides", api.OverrideViewSet, basename="override")
router.register("smart-routes", api.SmartRouteViewSet, basename="smartroute")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("", include(router.urls)),
]
