"""Settings of the blog example: a Django project that takes webhooks through
webhook_ingest.receive().

Two connections to the same database, as in production:
  default  the app (role blog_app, a member of webhook_ingest_enqueue): serves
           requests, every request in one transaction (ATOMIC_REQUESTS)
  owner    the schema owner (role blog_owner, a member of webhook_ingest_admin):
           runs the migrations, which create the tables and the handler and
           register the source; `manage.py migrate --database owner`
Under `manage.py test` the owner creates test_blog from the template database
that holds the extension, and default is pointed at it (TEST MIRROR changes
only the database name, so default still connects as blog_app).
"""
import os

BASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SECRET_KEY = os.environ.get("BLOG_DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = ["blog"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "blogsite.urls"
WSGI_APPLICATION = "blogsite.wsgi.application"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_db = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("BLOG_DB_NAME", "blog"),
    "HOST": os.environ.get("BLOG_DB_HOST", ""),  # a socket directory or a host name
    "PORT": os.environ.get("BLOG_DB_PORT", ""),
}
DATABASES = {
    "default": {
        **_db,
        "USER": os.environ.get("BLOG_DB_APP_USER", "blog_app"),
        "PASSWORD": os.environ.get("BLOG_DB_APP_PASSWORD", ""),
        "ATOMIC_REQUESTS": True,
        "TEST": {"MIRROR": "owner"},
    },
    "owner": {
        **_db,
        "USER": os.environ.get("BLOG_DB_OWNER_USER", "blog_owner"),
        "PASSWORD": os.environ.get("BLOG_DB_OWNER_PASSWORD", ""),
        # The DBA made a template database with the extension in it (dba-setup.sql);
        # the test runner clones it, so test_blog has the extension and its worker.
        "TEST": {"NAME": "test_blog", "TEMPLATE": os.environ.get("BLOG_DB_TEMPLATE", "blog_template")},
    },
}
DATABASE_ROUTERS = ["blogsite.routers.MigrateAsOwner"]

# Where the worker fetches a post, and the secrets the sender signs with
# (Standard Webhooks: "whsec_" + base64; several while rotating).  Read by the
# migration that registers the source.
BLOG_UPSTREAM_URL = os.environ.get("BLOG_UPSTREAM_URL", "http://127.0.0.1:18080/posts/{external_id}")
BLOG_WEBHOOK_SECRETS = [s for s in os.environ.get(
    "BLOG_WEBHOOK_SECRETS",
    # Example values only: set your sender's secrets in the environment.
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJvdGF0aW9u").split(",") if s]
BLOG_WEBHOOK_SOURCE = "blog"

LOGGING = {
    "version": 1,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
