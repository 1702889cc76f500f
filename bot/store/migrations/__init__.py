"""The schema's migrations, one folder per SQL dialect, numbered alike."""
