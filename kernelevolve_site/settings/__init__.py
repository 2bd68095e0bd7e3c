"""Settings split by environment: `base` holds everything, `dev`, `test` and `prod` adjust it.

Pick one with DJANGO_SETTINGS_MODULE (manage.py defaults to `dev`, pytest to `test`).
"""
