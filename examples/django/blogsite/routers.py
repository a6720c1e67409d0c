"""Migrations run on the owner connection only: the app role owns nothing and
may create nothing; it calls receive() and reads the blog's tables."""


class MigrateAsOwner:
    def allow_migrate(self, db, app_label, **hints):
        return db == "owner"
