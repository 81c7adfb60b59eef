"""Dissecting a layer (`layer`), as the window shows it (`layer_data`), the rows and counts the views and a notebook
read from a result (`rows`), and browsing the saved layers of a batch (`saved_layers`)."""
