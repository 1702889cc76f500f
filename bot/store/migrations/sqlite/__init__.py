"""Numbered SQL migrations of the job store: `NNNN_name.sql`, applied in order, each in one transaction.

Numbers are contiguous from 0001. A file holds plain SQL (no BEGIN/COMMIT: the loader wraps it), and a
shipped file is never edited: a change to the schema is a new file.
"""
