"""Accounts: roles (groups with permissions), login and API tokens."""
