from django.urls import path

from blog import views

urlpatterns = [
    path("webhooks/blog", views.blog_webhook),
]
