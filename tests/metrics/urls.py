from django.urls import include, path

urlpatterns = [path("metrics/", include("backwave_django.metrics.urls"))]
