"""Alembic environment and revisions of the metadata store's schema.

Kept inside the package (not at the repository root, and not called
``migrations``: that name belongs to plan migrations) so that an installed
armd can upgrade a database with ``armd db upgrade`` and no alembic.ini.
"""
