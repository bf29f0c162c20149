"""Schema revisions, oldest first by ``down_revision``; never edit one that has shipped."""
