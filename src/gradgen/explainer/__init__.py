"""The learner's page (``gradgen explain``): source, emitted gradient and graph, linked.

This package's __init__ imports nothing: ``Graph._repr_html_`` draws with graphview.py and
svg.py, which sit below ir, while page.py's ``page_for_built`` reads a build (see
tests/test_layering.py). gradgen loads the page modules only when a page is asked for.
"""
