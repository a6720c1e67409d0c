#!/usr/bin/python3
"""Django's command-line utility for the blog example (Debian's python3-django)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blogsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
