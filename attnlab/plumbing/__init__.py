"""The plumbing: what every room leans on and no lesson is about.

Argument checks, seeds and reproducibility, formatting of printed numbers, work spread over
processes, the assets (download, verify, cache) and the command line around them. Imports no
other room of attnlab; every room may import it.
"""
