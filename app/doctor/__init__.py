"""Each part of the stack checked, with what to fix: `python -m app doctor` and the page's
Status panel (app/api/routes/status.py).

One module per part checked: check.py (the `Check`), searxng.py, model.py, access.py.
The checks are split by what they cost. The free ones (SearXNG reachable, our engine
loaded, JSON on; the model server's list and served window) send no search and generate
nothing. The tool-calling check makes the model answer a tiny request. The Brave key check
runs one real search, which spends one query of the user's Brave plan: the page runs it
only when asked; the command line runs everything.
"""
