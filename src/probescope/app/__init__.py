"""The application: main window, workspaces, worker pool, settings, export and command line."""
