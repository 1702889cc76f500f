"""The database: the job store and its parts, SQLite and PostgreSQL behind one interface, migrations per dialect."""
