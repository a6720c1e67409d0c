"""The blog's tables.  Rows are written by the handler blog_store_post (a
PL/pgSQL function created by migration 0002), which webhook_ingest's worker
calls with each fetched post: not through the ORM, so every default below that
lives in Python (auto_now, auto_now_add, default=) is filled by the handler
too, and no post_save or m2m_changed signal fires."""
from django.db import models


class Category(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class Tag(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class Post(models.Model):
    external_id = models.CharField(max_length=200, unique=True)  # the sender's id of the post
    title = models.CharField(max_length=300)
    status = models.CharField(max_length=20, default="published")
    fetch_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # An automatic through table (blog_post_tags: id, post_id, tag_id) ...
    tags = models.ManyToManyField(Tag, related_name="posts")
    # ... and an explicit one, with a column of its own.
    categories = models.ManyToManyField(Category, through="Filing", related_name="posts")

    def __str__(self):
        return self.title


class Filing(models.Model):
    post = models.ForeignKey(Post, on_delete=models.CASCADE)
    category = models.ForeignKey(Category, on_delete=models.CASCADE)
    filed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["post", "category"], name="blog_filing_post_category")]
