"""WSGI entry point (gunicorn blogsite.wsgi, or `manage.py runserver` to try it)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blogsite.settings")
application = get_wsgi_application()
